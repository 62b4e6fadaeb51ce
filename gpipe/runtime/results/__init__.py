"""What a run leaves on the workers, made into a result: :class:`HeldResult`, the base of every family's result
kept there in blocks, and the blocks of a walk-shaped run's output (``output_blocks``, ``assemble_blocks``,
``kept_blocks``)."""

from .._kept import kept_blocks
from ._held_result import HeldResult
from ._output_blocks import assemble_blocks, id_dtype, output_blocks

__all__ = ["HeldResult", "assemble_blocks", "id_dtype", "kept_blocks", "output_blocks"]
