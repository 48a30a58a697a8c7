"""Prompts that match their items: each item's own setting instructions, StorySim's prompt
table (Appendix C.1, Table 2) and AnaToM's prompt (Appendix A.3.2), chat and completion forms.

Which instruction an item gets (:func:`frame_for`):

- AnaToM items (``generator`` or ``setting`` ``"anatom"``) get AnaToM's own prompt: its
  system message (unless the model file sets one) and its user template, the story between
  ``— STORY —`` and ``— END OF STORY —`` (the item's ``metadata["instructions"]``, if any,
  follow AnaToM's first sentence);
- a StorySim item that carries ``metadata["instructions"]`` (every item of the story
  generator does: its setting's rules) gets StorySim's lead sentence followed by those
  rules — for the rooms setting with StorySim's own rules this is prompt 1 verbatim;
- an item without instructions gets the prompt table's entry (rooms only: those entries say
  that everyone starts in the hallway; a field or calls item without instructions is refused
  rather than told so).

``prompt = k`` (2–12) picks one of StorySim's paraphrases. An item carrying StorySim's own
rooms rules (or a rooms item without instructions) gets the paraphrase verbatim. Any other
item gets the paraphrase's own framing — its lead, its layout (prose, ``•`` or ``-``
bullets) and its closing lines — around the item's own rules in place of the paraphrase's
rooms rules (:data:`PARAPHRASE_FRAMES`, :func:`paraphrase`), so the prompt factor varies
the wording and layout while every prompt stays true to its story. The rules' last sentence
("There is enough information to answer every question.") is left out there, since each
paraphrase closes with its own version of it.

A StorySim request is built as::

    <instruction>

    Story:
    <story>

    Question: <question>
    <answer_instruction, if any>

(``Story:`` is not repeated for the table entries that already end with it). Few-shot examples
come first, each as a user turn with its gold answer as the assistant turn (chat form), or as
the same block followed by ``Answer: <gold>`` (completion form, which ends with ``Answer:``);
they are rendered with the test item's frame.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tomstats._io import json_dumps, sha256_text
from tomstats.evaluate.config import ModelConfig
from tomstats.stories.items import Item

__all__ = ["ANATOM_LEAD", "ANATOM_SYSTEM", "PARAPHRASE_FRAMES", "PROMPTS", "STORYSIM_LEAD",
           "STORYSIM_RULES", "Frame", "ParaphraseFrame", "Request", "build_request",
           "frame_for", "item_instructions", "paraphrase", "render_block"]

#: StorySim's prompt table, verbatim (index = the paper's prompt number).
PROMPTS: dict[int, str] = {
    1: "Read the following story and answer the question at the end. Note that all characters "
       "start in the hallway. Characters in the same location can see where each other go when "
       "someone leaves. If characters are in different locations, they cannot see each other. "
       "There is enough information to answer every question.",
    2: "Please read the following story and answer the concluding question. Every character "
       "starts in the hallway. Characters who occupy the same location can observe each other's "
       "departures, while those in separate locations cannot. All questions are answerable, so "
       "be sure to provide an answer.",
    3: "INSTRUCTIONS: Read the story and answer the question that follows. All characters begin "
       "in the hallway. When two characters share a space, they know where the other goes upon "
       "leaving; characters in different spaces lack this information. Every question has a "
       "sufficient basis in the story, and you must provide an answer. Story:",
    4: "Review the story and give the answer to the final question. Characters start out in the "
       "hallway. Characters in the same room always observe each other's movements, while "
       "characters in different rooms remain unaware. The necessary information is guaranteed "
       "to be available; provide the answer succinctly.",
    5: "Read the following narrative and answer the question that appears at the end. All "
       "characters begin in the hallway. Shared locations allow characters to see one another "
       "move; separated characters have no visibility. Rely solely on the information in the "
       "story and give a direct answer.",
    6: "Carefully read the story and respond to the final question. Every character starts in "
       "the hallway. Characters sharing a location know where others go when they leave; "
       "characters in different locations do not. The question can be answered from the text "
       "alone—state your conclusion briefly.",
    7: "Instructions Read the story and answer the question that follows. Rules:\n"
       "• All characters begin in the hallway.\n"
       "• When characters share a location, they observe each other's movements; those in "
       "different places cannot.\n"
       "• When characters share a location, they observe each other's movements; those in "
       "different places cannot.\n"
       "• The answer is fully determined by the story. Provide a concise, final answer.",
    8: "Instructions You will read a story involving characters moving between locations and "
       "then answer comprehension questions. Rules:\n"
       "• All characters start in the hallway.\n"
       "• Characters who share a location can track each other's departures; characters who "
       "are apart cannot\n"
       "• The question is completely answerable from the story.\n"
       "• Provide a single, final answer.",
    9: "Instructions: Read the story about characters moving between different locations, then "
       "answer the question that follows. Rules:\n"
       "• All characters begin in the hallway.\n"
       "• Characters in the same place can observe each other's departures; characters in "
       "different places cannot.\n"
       "• The question is fully answerable from the provided text.\n"
       "• Respond with one clear final answer. Story:",
    10: "You are an assistant tasked with reading a story about characters moving between "
        "locations and then answering questions based on it. Follow these rules:\n\n"
        "- All characters start in the hallway.\n"
        "- Characters who share a location can see where others go; characters who are apart "
        "lack this visibility.\n"
        "- The question is fully answerable from the narrative.\n"
        "- Provide one final answer.\n\n"
        "If it ever seems like information is missing, re-check the story—it always contains "
        "enough clues. Avoid repeating yourself. Story:",
    11: "You are a helpful reading assistant that will read the provided story about characters "
        "moving between locations, then answer comprehension questions at the end. Here are "
        "some rules that you must remember:\n\n"
        "- All of the characters start in the hallway.\n"
        "- Characters who share a location know where the other goes when leaving; characters "
        "in separate locations have no visibility.\n"
        "- The question is 100 percent answerable using the given information.\n"
        "- Output a single final answer.\n\n"
        "If you ever think there isn't enough information in the story, check again, because "
        "the questions are designed to be answerable by the prompt. Try not to repeat yourself. "
        "Story:",
    12: "INSTRUCTIONS: Read the following story and answer the question at the end. Note that "
        "all characters start in the hallway. If two characters are in the same location, then "
        "they know where each other are. If one of them leaves the location, then the other "
        "will know where they went. There is enough information to answer every question. You "
        "must provide an answer to every question.\n\nStory:",
}


@dataclass(frozen=True)
class ParaphraseFrame:
    """The framing of one StorySim paraphrase around its rules.

    ``PROMPTS[k] == head + <the paraphrase's rooms rules> + tail``; ``bullet`` is the mark
    the paraphrase puts before each rule (``""`` for prose), each bullet on its own line.
    """

    head: str
    tail: str
    bullet: str = ""


#: The framing of StorySim's paraphrases 2–12 (see :func:`paraphrase`).
PARAPHRASE_FRAMES: dict[int, ParaphraseFrame] = {
    2: ParaphraseFrame("Please read the following story and answer the concluding question. ",
                       " All questions are answerable, so be sure to provide an answer."),
    3: ParaphraseFrame("INSTRUCTIONS: Read the story and answer the question that follows. ",
                       " Every question has a sufficient basis in the story, and you must "
                       "provide an answer. Story:"),
    4: ParaphraseFrame("Review the story and give the answer to the final question. ",
                       " The necessary information is guaranteed to be available; provide the "
                       "answer succinctly."),
    5: ParaphraseFrame("Read the following narrative and answer the question that appears at "
                       "the end. ",
                       " Rely solely on the information in the story and give a direct answer."),
    6: ParaphraseFrame("Carefully read the story and respond to the final question. ",
                       " The question can be answered from the text alone—state your "
                       "conclusion briefly."),
    7: ParaphraseFrame("Instructions Read the story and answer the question that follows. "
                       "Rules:\n",
                       "\n• The answer is fully determined by the story. Provide a concise, "
                       "final answer.", "• "),
    8: ParaphraseFrame("Instructions You will read a story involving characters moving between "
                       "locations and then answer comprehension questions. Rules:\n",
                       "\n• The question is completely answerable from the story.\n"
                       "• Provide a single, final answer.", "• "),
    9: ParaphraseFrame("Instructions: Read the story about characters moving between different "
                       "locations, then answer the question that follows. Rules:\n",
                       "\n• The question is fully answerable from the provided text.\n"
                       "• Respond with one clear final answer. Story:", "• "),
    10: ParaphraseFrame("You are an assistant tasked with reading a story about characters "
                        "moving between locations and then answering questions based on it. "
                        "Follow these rules:\n\n",
                        "\n- The question is fully answerable from the narrative.\n"
                        "- Provide one final answer.\n\n"
                        "If it ever seems like information is missing, re-check the story—it "
                        "always contains enough clues. Avoid repeating yourself. Story:", "- "),
    11: ParaphraseFrame("You are a helpful reading assistant that will read the provided story "
                        "about characters moving between locations, then answer comprehension "
                        "questions at the end. Here are some rules that you must remember:\n\n",
                        "\n- The question is 100 percent answerable using the given "
                        "information.\n- Output a single final answer.\n\n"
                        "If you ever think there isn't enough information in the story, check "
                        "again, because the questions are designed to be answerable by the "
                        "prompt. Try not to repeat yourself. Story:", "- "),
    12: ParaphraseFrame("INSTRUCTIONS: Read the following story and answer the question at the "
                        "end. ",
                        " There is enough information to answer every question. You must "
                        "provide an answer to every question.\n\nStory:"),
}

_ANSWERABLE = "There is enough information to answer every question."


def paraphrase(k: int, rules: str) -> str:
    """StorySim's paraphrase ``k`` (2–12) told with ``rules`` in place of its rooms rules.

    The result is ``head + R + tail`` of :data:`PARAPHRASE_FRAMES` ``[k]``, where ``R`` is
    ``rules`` without its closing "There is enough information to answer every question."
    (each paraphrase has its own closing), as prose or, for the bulleted paraphrases, one
    bullet per sentence ("Note that all characters …" becoming "All characters …").
    """
    frame = PARAPHRASE_FRAMES[k]
    body = rules.strip().removesuffix(_ANSWERABLE).strip()
    if frame.bullet:
        sentences = [x for x in re.split(r"(?<=[.!?])\s+", body) if x]
        sentences = [x[10].upper() + x[11:] if x.startswith("Note that ") else x
                     for x in sentences]
        body = "\n".join(frame.bullet + x for x in sentences)
    return frame.head + body + frame.tail


#: StorySim's lead sentence (prompt 1), followed by a setting's rules.
STORYSIM_LEAD = "Read the following story and answer the question at the end."

#: StorySim's own rules of the rooms setting (prompt 1 after its lead sentence).
STORYSIM_RULES = PROMPTS[1].removeprefix(STORYSIM_LEAD + " ")

#: AnaToM's system prompt (Appendix A.3.2), verbatim.
ANATOM_SYSTEM = ("You are an expert in reading comprehension. Answer the following question "
                 "based ONLY on the text provided in the story. Provide only the answer, "
                 "without any introductory phrases or explanations.")

#: AnaToM's user prompt, first sentence (the story follows between its markers).
ANATOM_LEAD = "Please read the following story and answer the subsequent question."


@dataclass(frozen=True)
class Frame:
    """How one item is put to a model.

    ``instruction`` heads the user turn; the story stands between ``story_open`` and
    ``story_close``; ``system`` is the system message the prompt family brings (AnaToM's),
    used when the model file sets none.
    """

    instruction: str
    story_open: str = "Story:"
    story_close: str = ""
    system: str = ""


def item_instructions(item: Item) -> str | None:
    """The item's own setting instructions (``metadata["instructions"]``), or ``None``.

    ``ValueError`` naming the item when the field is there but not a string.
    """
    inst = item.metadata.get("instructions") if isinstance(item.metadata, Mapping) else None
    if inst is None:
        return None
    if not isinstance(inst, str):
        raise ValueError(f"item {item.item_id!r}: metadata['instructions'] must be a string, "
                         f"got {type(inst).__name__}")
    return inst.strip() or None


def _is_anatom(item: Item) -> bool:
    return item.generator == "anatom" or item.setting == "anatom"


def frame_for(item: Item, prompt: int = 1) -> Frame:
    """The frame of ``item`` under prompt number ``prompt`` (see the module docstring).

    Raises
    ------
    ValueError
        For a non-rooms StorySim item without instructions.
    """
    inst = item_instructions(item)
    if _is_anatom(item):
        lead = ANATOM_LEAD + (" " + inst if inst else "")
        return Frame(lead, "— STORY —\n", "\n\n— END OF STORY —", ANATOM_SYSTEM)
    if inst is None:
        if item.setting not in ("rooms", ""):
            raise ValueError(
                f"item {item.item_id!r} (setting {item.setting!r}) carries no "
                "metadata['instructions'], and StorySim's prompt table describes the rooms "
                "setting only; regenerate the items with tomstats stories (they carry their "
                "setting's rules) or add the instructions")
        return Frame(PROMPTS[prompt])
    if inst == STORYSIM_RULES:
        return Frame(PROMPTS[prompt])
    if prompt != 1:
        return Frame(paraphrase(prompt, inst))
    if inst.lower().startswith(("read ", "please read")):
        return Frame(inst)
    return Frame(f"{STORYSIM_LEAD} {inst}")


@dataclass(frozen=True)
class Request:
    """One request for one (item, sample): what is sent, and the hashes that key it.

    ``messages`` is set in chat form, ``prompt`` in completion form. ``item`` rides along for
    the heuristic backend and is not part of the request hash. Each hash is computed once
    per request and kept (the runner reads the request hash for the cache key and the log).
    """

    item: Item
    sample: int
    form: str
    messages: tuple[dict[str, str], ...]
    prompt: str
    temperature: float
    max_tokens: int
    seed: int
    stop: tuple[str, ...]

    def payload(self) -> dict[str, Any]:
        """Everything that determines the answer (input of :attr:`request_hash`)."""
        d: dict[str, Any] = {"form": self.form, "temperature": self.temperature,
                             "max_tokens": self.max_tokens, "seed": self.seed,
                             "stop": list(self.stop)}
        if self.form == "chat":
            d["messages"] = [dict(m) for m in self.messages]
        else:
            d["prompt"] = self.prompt
        return d

    @cached_property
    def prompt_hash(self) -> str:
        """SHA-256 of the rendered prompt alone (messages or completion string)."""
        if self.form == "chat":
            return sha256_text(json_dumps([dict(m) for m in self.messages]))
        return sha256_text(self.prompt)

    @cached_property
    def request_hash(self) -> str:
        """SHA-256 of :meth:`payload` (prompt and decoding settings, seed included)."""
        return sha256_text(json_dumps(self.payload()))


def render_block(instruction: str | None, story: str, question: str,
                 answer_instruction: str = "", *, story_open: str = "Story:",
                 story_close: str = "") -> str:
    """The text of one story + question block, optionally headed by the instruction."""
    if instruction:
        head = instruction.rstrip()
        head = head if head.endswith(story_open.strip()) else head + "\n\n" + story_open
    else:
        head = story_open
    tail = f"Question: {question.strip()}"
    if answer_instruction:
        tail += "\n" + answer_instruction.strip()
    return f"{head}\n{story.strip()}{story_close}\n\n{tail}"


def build_request(item: Item, config: ModelConfig, sample: int = 0,
                  examples: Sequence[Item] = ()) -> Request:
    """Build the request for one item and sample.

    Parameters
    ----------
    item : Item
        The question; its frame (instruction, story markers) comes from :func:`frame_for`.
    config : ModelConfig
        Supplies the prompt number, form, system prompt and decoding settings.
    sample : int
        Sample index ``k``; the request's seed is ``config.seed + k``.
    examples : sequence of Item
        Few-shot examples (answered with their gold answers, from the item's setting), put
        before the question in the item's frame.

    Returns
    -------
    Request
    """
    frame = frame_for(item, config.prompt)
    ai = config.answer_instruction
    box = {"story_open": frame.story_open, "story_close": frame.story_close}
    system = config.system_prompt or frame.system
    if config.prompt_form == "chat":
        msgs: list[dict[str, str]] = []
        if system:
            msgs.append({"role": "system", "content": system})
        for ex in examples:
            msgs.append({"role": "user", "content": render_block(
                frame.instruction, ex.story, ex.question, ai, **box)})
            msgs.append({"role": "assistant", "content": ex.answer})
        msgs.append({"role": "user", "content": render_block(
            frame.instruction, item.story, item.question, ai, **box)})
        messages, prompt = tuple(msgs), ""
    else:
        head = frame.instruction.rstrip().removesuffix("Story:").rstrip()
        blocks = [f"{frame.system}\n\n{head}" if frame.system and not config.system_prompt
                  else head]
        for ex in examples:
            blocks.append(render_block(None, ex.story, ex.question, ai, **box)
                          + f"\nAnswer: {ex.answer}")
        blocks.append(render_block(None, item.story, item.question, ai, **box) + "\nAnswer:")
        messages, prompt = (), "\n\n".join(blocks)
    return Request(item=item, sample=sample, form=config.prompt_form, messages=messages,
                   prompt=prompt, temperature=config.temperature, max_tokens=config.max_tokens,
                   seed=config.seed + sample, stop=config.stop)
