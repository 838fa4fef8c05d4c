"""The native training loop: a minimal Lightning-like driver of OnTheFly's callbacks."""

from onthefly.native.state import StepState
from onthefly.native.trainer import Trainer

__all__ = ["StepState", "Trainer"]
