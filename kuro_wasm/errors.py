"""Errors raised by kuro_wasm: one root, the tree drawn here.

## The one decision
Bad input and misuse are typed exceptions; refused work is not. A denial
(argv instead of a guest spec, a missing capability, a host-mode session) is a
value returned by :func:`kuro_wasm.model.sessions.denial`, and a refused import call is
recorded in the receipt's ``kuro/denials``: neither is raised. What *is* raised
here is for constructor input that cannot describe a run (unknown mode or
capability, a malformed guest spec, a non-int exit code), for appending to a
finished stream, for checkpoints this version cannot read, and for ledger and
host failures.

Errors describing bad input subclass :class:`ValueError`, the builtin callers
already catch. Every class has a stable kebab-case ``reference`` that tools
print; :class:`ModelError` also carries the ``reason`` (which rule refused) and
an optional ``hint``.

::

    KuroError
    ├── ModelError               (ValueError)   input that cannot describe a session/command/receipt
    ├── StreamClosed                            append/finish on a stream that is not running
    ├── CheckpointError          (ValueError)   checkpoint data that is not a checkpoint
    │   └── CheckpointVersionError              a checkpoint version this code cannot read
    ├── FixtureError             (ValueError)   a fixture case file that is not a case (guests/fixtures/schema.json)
    ├── LedgerError                             the run ledger failed
    │   ├── OperationConflict                   one operation id, two different requests
    │   └── LedgerCorrupt                       the ledger's rows do not add up
    ├── HostError                               the host could not do what was asked
    │   ├── LoadError                           guest bytes missing, unverifiable or not a module
    │   └── NotStarted                          a run refused before it started (a closed pool): nothing ran
    └── BatchError                              a batch could not go on (no cluster, no worker can run it)

## Not done here
No error carries a denial, and no guest outcome (trap, timeout, exit) is an
error: those are receipts.
"""

from __future__ import annotations

__all__ = [
    "BatchError",
    "CheckpointError",
    "CheckpointVersionError",
    "FixtureError",
    "HostError",
    "KuroError",
    "LedgerCorrupt",
    "LedgerError",
    "LoadError",
    "ModelError",
    "NotStarted",
    "OperationConflict",
    "StillRunning",
    "StreamClosed",
]


class KuroError(Exception):
    """Root of every exception kuro_wasm raises on purpose."""

    reference = "kuro-error"


class ModelError(KuroError, ValueError):
    """Input that cannot describe a session, guest spec, stream event or receipt.

    ``reason`` names the rule (``"unknown-mode"``, ``"unknown-capability"``,
    ``"signed-opt-in-required"``, ``"invalid-guest-spec"``,
    ``"exit-code-not-int"`` …); ``hint`` says what to do instead.
    """

    reference = "invalid-kuro-model-input"

    def __init__(self, message: str, *, reason: str = "invalid-input", hint: str | None = None) -> None:
        super().__init__(message if hint is None else f"{message} (hint: {hint})")
        self.reason = reason
        self.hint = hint


class StreamClosed(KuroError):
    """An append or finish on a stream whose state is not ``running``.

    The stream's guest has already ended (``exited``) or did not survive its
    host (``orphaned``); an orphan is closed with
    :func:`kuro_wasm.model.checkpoint.abandon`.
    """

    reference = "stream-closed"

    def __init__(self, message: str, *, state: str) -> None:
        super().__init__(message)
        self.state = state


class CheckpointError(KuroError, ValueError):
    """Checkpoint data that is not the shape :mod:`kuro_wasm.model.checkpoint` writes."""

    reference = "invalid-checkpoint"


class CheckpointVersionError(CheckpointError):
    """A checkpoint written in a version this code cannot read."""

    reference = "unknown-checkpoint-version"

    def __init__(self, got: object, expected: int) -> None:
        super().__init__(f"unknown checkpoint version {got!r}; this code reads version {expected}")
        self.got = got
        self.expected = expected


class FixtureError(KuroError, ValueError):
    """A fixture case that is not a case: a key the format lacks, a value of the wrong type, a guest not found.

    The message names the case and the key (``guests/fixtures/schema.json`` is the format).
    """

    reference = "invalid-fixture"


class LedgerError(KuroError):
    """The run ledger could not record or replay an operation."""

    reference = "ledger-error"


class OperationConflict(LedgerError):
    """One operation id was submitted twice with different requests."""

    reference = "operation-conflict"


class LedgerCorrupt(LedgerError):
    """The ledger's stored rows are inconsistent (a receipt that does not hash, a torn row)."""

    reference = "ledger-corrupt"


class HostError(KuroError):
    """The host failed to do what was asked (not a guest outcome: those are receipts)."""

    reference = "host-error"


class StillRunning(TimeoutError):
    """A handle's ``wait(timeout)`` gave up: the guest is still running (and keeps running).

    Its own class (a :class:`TimeoutError`, as before) so that a waiter polling a run can tell its own
    timeout from a ``TimeoutError`` a program's signal handler raised during the wait.
    """


class LoadError(HostError):
    """Guest bytes could not be fetched, verified or compiled."""

    reference = "load-error"


class NotStarted(HostError):
    """A run was refused before anything of it started (a closed or broken worker pool, a run its worker
    could not be sent): nothing ran, so a ledger releases the op id it had claimed for it."""

    reference = "run-not-started"


class BatchError(KuroError):
    """A batch could not go on: no cluster to run on, or no worker able to run its invocations.

    What had finished is stored and was handed out; what had not run is released (its op ids
    may run later), and the error says which.
    """

    reference = "batch-error"
