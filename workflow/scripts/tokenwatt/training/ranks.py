"""The ranks of a trial that trains on several devices (``train.devices``), as its loop, evaluations and meter see them.

A trial of N devices runs as N processes of data-parallel training (one per device, started by the torch launcher:
``launch.py``). Every rank holds the whole subset and takes the same global batch of ``train.batch_size`` chunks
at every step, its own contiguous share of it (``rows``), so a trial trains the same chunks in the same steps
whatever N is: tokens and optimizer steps compare across device counts. Each rank's loss is its share of the global
batch's token-weighted mean (its summed loss over the global batch's target count), so the gradients summed over
ranks are the one-device step's up to the order of the sums. A trial of one device is ``ONE``, whose operations are
no-ops: its loop runs exactly as it always did, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Ranks:
    """This process's place among the trial's ranks: ``rank`` of ``world``."""

    rank: int = 0
    world: int = 1

    @property
    def many(self) -> bool:
        return self.world > 1

    def rows(self, start: int, end: int) -> slice:
        """This rank's contiguous share of rows ``start:end`` (a global batch, or the eval set): shares differ by one
        row at most, the first ranks' the longer; empty where there are fewer rows than ranks (an epoch's last, short
        batch), which the loop handles (``train``)."""
        base, extra = divmod(end - start, self.world)
        first = start + self.rank * base + min(self.rank, extra)
        return slice(first, first + base + (self.rank < extra))

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over the ranks, in place (every rank gets the sum); itself on one device."""
        if self.many:
            torch.distributed.all_reduce(tensor)
        return tensor

    def largest(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor``'s largest value over the ranks, in place; itself on one device."""
        if self.many:
            torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.MAX)
        return tensor

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is true on any rank (every rank gets the answer: a decision they all take together);
        ``flag`` itself on one device."""
        if not self.many:
            return flag
        flags: list[Any] = [None] * self.world
        torch.distributed.all_gather_object(flags, flag)
        return any(flags)

    def gather(self, value: Any) -> list[Any] | None:
        """Every rank's ``value`` in rank order, on rank 0 (None on the others); ``[value]`` on one device."""
        if not self.many:
            return [value]
        got: list[Any] | None = [None] * self.world if self.rank == 0 else None
        torch.distributed.gather_object(value, got, dst=0)
        return got

    def from_first(self, value: Any) -> Any:
        """Rank 0's ``value``, on every rank; ``value`` itself on one device."""
        if not self.many:
            return value
        box = [value]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        """Wait until every rank is here (a meter window's end); nothing on one device."""
        if self.many:
            torch.distributed.barrier()


ONE = Ranks()
