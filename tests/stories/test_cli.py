"""``tomstats stories``: writes valid JSON Lines atomically; clear errors exit 2."""

from __future__ import annotations

import json

from tomstats.cli import main
from tomstats.stories import read_items

BOARD = """
name = "sally_rooms"
setting = "rooms"
n = 30
characters = ["Sally", "Anne", "Carl", "Dora"]
[[events]]
name = "cross_paths"
actors = ["Sally", "Anne"]
location = "room_1"
t = 5
[[events]]
name = "move"
actor = "Anne"
location = "room_2"
t = 6
[[events]]
name = "exclusive_random"
actors = ["Sally", "Anne"]
stop = 12
[[events]]
name = "move"
actor = "Anne"
location = "room_3"
t = 12
[[events]]
name = "exclusive_random"
actors = ["Sally", "Anne"]
stop = 30
[[questions]]
chain = ["Sally"]
target = "Anne"
[[questions]]
target = "Anne"
"""


def test_paper_design(tmp_path) -> None:
    out = tmp_path / "items.jsonl"
    rc = main(["stories", "--out", str(out), "--n-per-cell", "2", "--seed", "1",
               "--contexts", "200", "500", "--orders", "0", "2", "--no-progress"])
    assert rc == 0
    items = read_items(out)
    assert len(items) == 2 * 2 * 2
    assert {(it.context_words, it.tom_order) for it in items} == \
        {(200, 0), (200, 2), (500, 0), (500, 2)}
    for line in out.read_text().splitlines():
        assert json.loads(line)["format"] == "tomstats.items/3"
    assert [p.name for p in tmp_path.iterdir()] == ["items.jsonl"]  # no temporary left


def test_tellings_option(tmp_path, capsys) -> None:
    """``--tellings`` reaches the selection (recorded in each item) and is checked first."""
    out = tmp_path / "one.jsonl"
    assert main(["stories", "--out", str(out), "--n", "2", "--seed", "1", "--contexts", "200",
                 "--tellings", "1", "--no-progress"]) == 0
    assert {it.metadata["selection"]["tellings"] for it in read_items(out)} == {1}
    assert main(["stories", "--out", str(tmp_path / "two.jsonl"), "--n", "2", "--seed", "1",
                 "--contexts", "200", "--tellings", "2", "--no-progress"]) == 0
    assert {it.metadata["selection"]["tellings"]
            for it in read_items(tmp_path / "two.jsonl")} <= {1, 2}
    assert 2 in {it.metadata["selection"]["tellings"]
                 for it in read_items(tmp_path / "two.jsonl")}
    bad = tmp_path / "bad.jsonl"
    assert main(["stories", "--out", str(bad), "--tellings", "0"]) == 2
    assert "--tellings must be a positive integer, got 0" in capsys.readouterr().err
    assert not bad.exists()


def test_cores_option(tmp_path, capsys) -> None:
    """``--cores 2`` writes the items ``--cores 1`` writes, byte for byte; 0 is refused
    before any work."""
    args = ["stories", "--n", "2", "--seed", "1", "--contexts", "200", "500",
            "--tellings", "2", "--no-progress"]
    for n in (1, 2):
        assert main([*args, "--out", str(tmp_path / f"c{n}.jsonl"), "--cores", str(n)]) == 0
    assert (tmp_path / "c1.jsonl").read_bytes() == (tmp_path / "c2.jsonl").read_bytes()
    bad = tmp_path / "bad.jsonl"
    assert main(["stories", "--out", str(bad), "--cores", "0"]) == 2
    assert "--cores must be a positive integer, got 0" in capsys.readouterr().err
    assert not bad.exists()


def test_issue_spelling_and_anatom(tmp_path) -> None:
    out = tmp_path / "a.jsonl"
    assert main(["stories", "--design", "anatom", "--n", "3", "--seed", "1", "--out", str(out),
                 "--all-types"]) == 0
    assert len(read_items(out)) == 18


def test_storyboard_file(tmp_path) -> None:
    board = tmp_path / "board.toml"
    board.write_text(BOARD)
    out = tmp_path / "s.jsonl"
    assert main(["stories", "--storyboard", str(board), "--n", "4", "--out", str(out)]) == 0
    items = read_items(out)
    assert len(items) == 8
    first = [it for it in items if it.tom_order == 1]
    assert all(it.answer == "room_2" for it in first)
    assert all(it.answer == "room_3" for it in items if it.tom_order == 0)
    assert all(it.metadata["well_defined"] for it in first)


def test_errors_exit_2_and_write_nothing(tmp_path, capsys) -> None:
    out = tmp_path / "x.jsonl"
    assert main(["stories", "--out", str(out), "--n", "0"]) == 2
    assert "--n-per-cell must be a positive integer" in capsys.readouterr().err
    assert main(["stories", "--out", str(out), "--orders", "5", "--n", "1"]) == 2
    assert "orders" in capsys.readouterr().err
    assert main(["stories", "--out", str(tmp_path / "no" / "x.jsonl")]) == 2
    bad = tmp_path / "bad.toml"
    bad.write_text(BOARD.replace('location = "room_3"', 'location = "room_9"'))
    assert main(["stories", "--storyboard", str(bad), "--out", str(out)]) == 2
    assert "event 3 (move Anne -> room_9 t=12): location 'room_9'" in capsys.readouterr().err
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [bad]


def test_anatom_lengths(tmp_path) -> None:
    out = tmp_path / "a.jsonl"
    assert main(["stories", "--design", "anatom", "--n", "2", "--seed", "1", "--out", str(out),
                 "--all-types", "--anatom-lengths", "--contexts", "200", "500"]) == 0
    items = read_items(out)
    assert len(items) == 2 * 6 * 2
    assert {it.context_words for it in items} == {200, 500}


def test_storyboard_items_record_belief_status(tmp_path) -> None:
    board = tmp_path / "board.toml"
    board.write_text(BOARD)
    out = tmp_path / "s.jsonl"
    assert main(["stories", "--storyboard", str(board), "--n", "3", "--seed", "2", "--out",
                 str(out)]) == 0
    for it in read_items(out):
        want = "none" if not it.agents else (
            "true" if it.answer == it.last_location else "false")
        assert it.belief_status == want


def test_storyboard_items_of_orders_2_and_3_record_their_simpler_questions(tmp_path) -> None:
    """Issue 21, item 2 for higher orders: every order-k storyboard item records which of
    its simpler questions (reality and each proper sub-chain, in order) has the same answer,
    and the audit checks the share at each order."""
    from itertools import combinations

    from tomstats.stories import audit_items
    from tomstats.stories.beliefs import belief
    from tomstats.stories.world import Event, World

    board = tmp_path / "board.toml"
    board.write_text(BOARD + '\n[[questions]]\nchain = ["Carl", "Sally"]\ntarget = "Anne"\n'
                     '\n[[questions]]\nchain = ["Dora", "Carl", "Sally"]\ntarget = "Anne"\n')
    out = tmp_path / "s.jsonl"
    assert main(["stories", "--storyboard", str(board), "--n", "6", "--seed", "3", "--out",
                 str(out)]) == 0
    items = read_items(out)
    assert {it.tom_order for it in items} == {0, 1, 2, 3}
    for it in items:
        if it.tom_order < 2:
            assert it.same_as == "" and "simpler_answers" not in it.metadata
            continue
        sb = it.metadata["storyboard"]
        world = World(tuple(sb["characters"]), tuple(sb["locations"]),
                      tuple(tuple(e) for e in sb["edges"]),
                      {c: sb["start"] for c in sb["characters"]})
        evs = [Event(int(t), "enter", a, loc, s) for t, a, loc, s in it.metadata["events"]]
        k = len(it.agents)
        want = {"reality": belief(world, evs, (), it.target)}
        for r in range(1, k):
            for idx in combinations(range(k), r):
                label = "".join("S" + str(i + 1) for i in idx)
                want[label] = belief(world, evs, [it.agents[i] for i in idx], it.target)
        assert it.metadata["simpler_answers"] == want
        same = [label for label, a in want.items() if a == it.answer]
        assert it.same_as == ("+".join(same) or "none")
    scopes = {c.scope for c in audit_items(items).checks
              if c.name.startswith("order-") and "simpler" in c.name}
    assert scopes == {"rooms order 2", "rooms order 3"}


def test_length_ladders_and_the_audit_per_length(tmp_path, capsys) -> None:
    """``--within-story`` tells every story at every length; ``audit --per-length`` audits
    each length alone and all pooled, and exits 4 exactly when one of them fails."""
    out = tmp_path / "ladders.jsonl"
    assert main(["stories", "--out", str(out), "--n", "2", "--seed", "3", "--contexts", "200",
                 "500", "--orders", "1", "--within-story", "--ladder-anchor", "end",
                 "--tellings", "1", "--no-progress"]) == 0
    items = read_items(out)
    assert len(items) == 2 * 2
    assert {it.metadata["ladder"]["anchor"] for it in items} == {"end"}
    assert len({it.metadata["story_id"] for it in items}) == 2
    capsys.readouterr()
    report = tmp_path / "audit.json"
    rc = main(["stories", "audit", str(out), "--per-length", "--out", str(report)])
    text = capsys.readouterr().out
    for title in ("== 200 words:", "== 500 words:", "== all lengths pooled:"):
        assert title in text
    verdicts = json.loads(report.read_text())
    assert list(verdicts) == ["200", "500", "all"]
    failed = any(c["verdict"] == "FAIL" for a in verdicts.values() for c in a["checks"])
    assert rc == (4 if failed else 0)
    assert main(["stories", "--out", str(tmp_path / "x.jsonl"), "--contexts", "200",
                 "--within-story"]) == 2
    assert "within_story needs two context lengths" in capsys.readouterr().err
