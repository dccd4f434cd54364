"""klpsym: Linux livepatch symbol resolution, outside the kernel.

The kernel's exact answers -- positions (``old_sympos``), ``klp_find_object_symbol()``
verdicts and ``livepatch:`` messages, ``%pS`` -- for the running kernel or any kernel given
as a file, a package or a folder of packages; livepatch modules checked as the module loader
and livepatch would, with the definition every symbol binds.

    >>> import klpsym
    >>> k = klpsym.open("linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb")
    >>> [c.position for c in k.sympos("init_once")]
    [1, 2, 3, 4, 5, 6, 7]
    >>> k.lookup("init_once").message
    "livepatch: unresolvable ambiguity for symbol 'init_once' in object '(null)'"
    >>> k.describe(k.lookup("init_once", sympos=3).address + 4)
    'init_once+0x4/0x10'

Addresses are ints; kinds are strings (the constants below); errors are exceptions by kind
(``klpsym.Error`` and its subclasses); long work runs without the GIL and stops on Ctrl-C.
"""

from ._klpsym import (  # noqa: F401
    BadInputError,
    Binding,
    Candidate,
    CancelledError,
    CheckResult,
    CheckRun,
    Copy,
    Coverage,
    Definition,
    Drift,
    DriftRow,
    Error,
    Failure,
    FleetIter,
    IoError,
    Kernel,
    Lookup,
    NameMatch,
    NotFoundError,
    Patch,
    Problem,
    Symbol,
    TooLargeError,
    UsageError,
    __version__,
    check,
    drift,
    fleet,
    open,
    open_all,
    open_running,
)

# Lookup verdicts (Lookup.verdict).
FOUND = "found"
NOT_FOUND = "not_found"
AMBIGUOUS = "ambiguous"
POSITION_NOT_FOUND = "position_not_found"

# Patch verdicts (CheckResult.verdict).
ACCEPTED = "accepted"
UNVERIFIED = "unverified"
BINDS_ANOTHER_DEFINITION = "binds_another_definition"
PARTIAL_COVERAGE = "partial_coverage"
REFUSED_AT_LOAD = "refused_at_load"
REFUSED_WHEN_MODULE_LOADS = "refused_when_module_loads"
ORDINARY_MODULE = "ordinary_module"

# Copy.kind (Kernel.copies, CheckResult.coverage).
OUT_OF_LINE = "out_of_line"
CLONE = "clone"
INLINED = "inlined"
BY_NAME = "by_name"

# Copy.status in a check's coverage.
REPLACED = "replaced"
NOT_REPLACED = "not_replaced"
INIT = "init"
UNKNOWN = "unknown"

# Binding.as_built.
SAME = "same"
MOVED = "moved"
GONE = "gone"
UNPROVEN = "unproven"
# This kernel is itself the one taken as built-for (its release is the vermagic's): not proven.
ASSUMED = "assumed"

# How a run ends (CheckRun.outcome, CheckResult.outcome): the command's exit status 0, 1, 2.
OK = "ok"
NO = "no"
FAILED = "failed"

# Failure.kind: why a kernel could not be opened or checked (the exception classes' kinds).
KIND_NOT_FOUND = "not_found"
KIND_BAD_INPUT = "bad_input"
KIND_TOO_LARGE = "too_large"
KIND_IO = "io"
KIND_USAGE = "usage"
KIND_CANCELLED = "cancelled"

__all__ = [name for name in dir() if not name.startswith("_")]
