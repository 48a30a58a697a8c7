"""Story generator: worlds, belief tracking, StorySim storyboards, AnaToM worlds, items.

Public surface (see ``docs/stories.md``):

- :func:`build_design_items` — the context length × ToM order item set;
- :func:`classify_answer`, :func:`normalize_location` — StorySim's error taxonomy;
- :class:`World`, :class:`Event`, :func:`belief` — worlds, events and nested beliefs;
- :class:`Storyboard`, :func:`generate_story` and the scripted events — StorySim;
- :func:`anatom_items`, :func:`placement_patterns` — AnaToM worlds and questions;
- :func:`audit_items`, :func:`audit_by_length`, :func:`format_audit` — the item audit
  (``tomstats stories audit``);
- :func:`weave` — a story spread through a natural host text (BABILong-style);
- :class:`Item`, :func:`read_items`, :func:`write_items`, :func:`items_frame` — the item
  schema (JSON Lines, DataFrame).
"""

from __future__ import annotations

from tomstats.stories.anatom import Composition, anatom_items, placement_patterns
from tomstats.stories.audit import audit_by_length, audit_items, format_audit
from tomstats.stories.beliefs import belief, last_perceived, observers, well_defined
from tomstats.stories.frame import items_frame
from tomstats.stories.items import ITEM_FORMAT, Item, read_items, write_items
from tomstats.stories.items_design import (
    DEFAULT_CONTEXTS,
    DEFAULT_ORDERS,
    build_design_items,
    design_storyboard,
)
from tomstats.stories.questions import first_common_location, tom_question, wm_question
from tomstats.stories.render import length_window, word_count
from tomstats.stories.settings import SETTINGS, Setting, get_setting, make_setting
from tomstats.stories.storyboard import (
    Scripted,
    Story,
    Storyboard,
    cross_paths,
    exclusive_random,
    first_order_storyboard,
    generate_story,
    move,
    second_order_storyboard,
    validate_storyboard,
)
from tomstats.stories.taxonomy import ERROR_CATEGORIES, classify_answer, normalize_location
from tomstats.stories.weaving import weave
from tomstats.stories.world import Event, World, enter, move_object, replay

__all__ = [
    "DEFAULT_CONTEXTS", "DEFAULT_ORDERS", "ERROR_CATEGORIES", "ITEM_FORMAT", "SETTINGS",
    "Composition", "Event", "Item", "anatom_items", "audit_by_length", "audit_items",
    "format_audit",
    "items_frame", "placement_patterns", "weave",
    "well_defined", "Scripted", "Setting", "Story", "Storyboard", "World", "belief",
    "build_design_items", "classify_answer", "cross_paths", "design_storyboard", "enter",
    "exclusive_random", "first_common_location", "first_order_storyboard", "generate_story",
    "get_setting", "last_perceived", "length_window", "make_setting", "move", "move_object",
    "normalize_location", "observers", "read_items", "replay", "second_order_storyboard",
    "tom_question", "validate_storyboard", "wm_question", "word_count", "write_items",
]
