"""CBDDL tasks: parser, AST, canonical writer, validation, predicate catalogue.

CBDDL is LIBERO's BDDL extended by VLA-Arena (paper 001, App. 7) with ``:moving_objects``,
the visual perturbation blocks and ``:cost``; see :mod:`robosafe.tasks.parser` for the grammar
and the seconds-vs-steps rule for motion timing. Example tasks ship in ``tasks/examples``.
"""

from robosafe.tasks.ast import (
    And,
    Camera,
    Decl,
    Formula,
    MotionAttr,
    MovingObject,
    Noise,
    Not,
    Or,
    Pos,
    Pred,
    Problem,
    Region,
    Setting,
)
from robosafe.tasks.parser import DEFAULT_CONTROL_FREQ, parse_file, parse_task
from robosafe.tasks.validate import load_catalogue, lookup_predicate, validate_task
from robosafe.tasks.writer import write_task

__all__ = [
    "DEFAULT_CONTROL_FREQ", "And", "Camera", "Decl", "Formula", "MotionAttr", "MovingObject",
    "Noise", "Not", "Or", "Pos", "Pred", "Problem", "Region", "Setting", "load_catalogue",
    "lookup_predicate", "parse_file", "parse_task", "validate_task", "write_task",
]
