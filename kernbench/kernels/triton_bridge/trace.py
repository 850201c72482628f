"""`ProgramTraces`: a launch's grid interpreted once per program shape, replayed for every program.

A launch keeps up to `MAX_SHAPES` tapes (`tape`), each recorded by a dry
run of one program or remade from a shape an earlier launch of the kernel
kept (`kept_shapes`), and runs each program from the first tape whose
guards hold for it; a program no tape follows is interpreted.
"""

from __future__ import annotations

from kernbench.kernels.errors import UnsupportedKernelError
from kernbench.kernels.kept_values import MemoBudget
from kernbench.kernels.triton_bridge.builder import BridgeBuilder
from kernbench.kernels.triton_bridge.kept_shapes import MAX_SHAPES, KeptShapes, Shape, launch_signature
from kernbench.kernels.triton_bridge.tape import Tape, dry_run


class ProgramTraces:
    """The tapes of one launch, at most `MAX_SHAPES`, most recently used first.

    A dry run costs about one interpretation, so a new shape is recorded only
    while the tapes so far have served at least as many other programs as
    there are tapes (the first two shapes are always tried): a kernel whose
    control flow differs in every program (a persistent loop starting at its
    program id) stops recording after two.
    """

    def __init__(self, kernel_name: str, fn, body, arguments: dict, grid: tuple[int, int, int],
                 kept: KeptShapes) -> None:
        self._kernel_name = kernel_name
        self._fn = fn
        self._body = body  # `fn` rewritten (`rewriter.rewritten`)
        self._arguments = arguments
        self._grid = grid
        self._tapes: list[Tape] = []
        self._recording = True
        self._reused = 0
        self.dry_runs = 0
        self.memo_budget = MemoBudget()
        self._kept = kept  # the kernel's shapes from other launches, and where this launch's are kept for later ones
        self._shapes: set[Shape] = set()  # the shapes this launch's tapes were made from

    def release(self) -> None:
        """The launch has ended: its remembered results are dropped and their bytes go back to the pool."""
        for tape in self._tapes:
            tape.forget()
        self.memo_budget.release()

    def record_first(self) -> None:
        """Record the tape of program (0, 0, 0) now (the launch's check); an `UnsupportedKernelError` is raised.

        Any other failure of the dry run leaves the programs to be
        interpreted, which meets it where it belongs, as in `run`.
        """
        if self._tapes or not self._recording:
            return
        tape = self._record((0, 0, 0), raise_unsupported=True)
        if tape is None:
            self._recording = False
        else:
            self._tapes.insert(0, tape)

    def run(self, program_id: tuple[int, int, int], port, timing_only: bool, memcheck: bool = True) -> bool:
        """Run the program from a tape (recording one if none fits); False: it must be interpreted.

        When False is returned nothing has reached `port`.
        """
        builder = BridgeBuilder(port, self._kernel_name, program_id, self._grid, timing_only, memcheck)
        tapes = self._tapes
        for index, tape in enumerate(tapes):
            prepared = tape.prepare(builder)
            if prepared is not None:
                if index:
                    tapes.insert(0, tapes.pop(index))
                self._reused += 1
                break
        else:
            if not self._recording or len(tapes) >= MAX_SHAPES or (len(tapes) >= 2 and self._reused < len(tapes)):
                return False
            tape = self._record(program_id)
            prepared = None if tape is None else tape.prepare(builder)
            if prepared is None:
                self._recording = False
                return False
            tapes.insert(0, tape)
        tape.finish(builder, prepared)
        return True

    def _record(self, program_id, raise_unsupported: bool = False) -> Tape | None:
        """The tape of `program_id`: from a shape another launch recorded, where its guards hold for this
        program (`Shape.values_for`), else from a dry run; None when the tape cannot follow the program."""
        signature = launch_signature(self._fn, self._arguments)
        if signature is not None:
            found = self._kept.find(self._fn, signature, self._shapes, self._kernel_name, self._arguments, program_id,
                                    self._grid)
            if found is not None:
                shape, values = found
                self._shapes.add(shape)
                return Tape(shape.steps, shape.kinds, values, self.memo_budget)
        self.dry_runs += 1
        try:
            recorder = dry_run(self._kernel_name, self._body, self._arguments, program_id, self._grid)
        except UnsupportedKernelError:
            if raise_unsupported:
                raise
            return None
        except Exception:
            return None
        shape = Shape(recorder)
        self._shapes.add(shape)
        if signature is not None:
            self._kept.keep(self._fn, signature, shape)
        return Tape(recorder.steps, recorder.kinds, recorder.values, self.memo_budget)
