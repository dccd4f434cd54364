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

Addresses are ints; kinds are strings (each kind's values are a class of constants below:
``klpsym.ProblemKind.SYMBOL_NOT_FOUND``); errors are exceptions by kind
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
    SourceFrame,
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

# Kinds come back as strings; each class below holds one kind's every value, by the
# library's own name for it (tests/test_kinds.py holds them to the Rust enums of that name).
# Compare with them: ``if r.verdict == klpsym.PatchVerdictKind.ACCEPTED``.


class SourceKind:
    """Kernel.kind: what a kernel was opened from."""

    KALLSYMS = "kallsyms"
    SYSTEM_MAP = "system_map"
    VMLINUX_ELF = "vmlinux_elf"
    KERNEL_IMAGE = "kernel_image"
    MODULE = "module"


class Level:
    """The level of a note (Kernel.notes, open_all's notes): ``(level, text)``."""

    NOTE = "note"
    WARNING = "warning"
    ERROR = "error"


class LookupVerdict:
    """Lookup.verdict: what klp_find_object_symbol() answers."""

    FOUND = "found"
    NOT_FOUND = "not_found"
    AMBIGUOUS = "ambiguous"
    POSITION_NOT_FOUND = "position_not_found"


class PatchVerdictKind:
    """CheckResult.verdict."""

    ACCEPTED = "accepted"
    UNVERIFIED = "unverified"
    BINDS_ANOTHER_DEFINITION = "binds_another_definition"
    PARTIAL_COVERAGE = "partial_coverage"
    REFUSED_AT_LOAD = "refused_at_load"
    REFUSED_WHEN_MODULE_LOADS = "refused_when_module_loads"
    ORDINARY_MODULE = "ordinary_module"


class ProblemKind:
    """Problem.kind: what the kernel refuses, and where."""

    MODULES_UNSUPPORTED = "modules_unsupported"
    ELF_HEADER = "elf_header"
    THIS_MODULE = "this_module"
    VERMAGIC_MISMATCH = "vermagic_mismatch"
    SYMBOL_VERSION_MISMATCH = "symbol_version_mismatch"
    LIVEPATCH_DISABLED = "livepatch_disabled"
    FORCE_LOAD_REQUIRED = "force_load_required"
    UNSIGNED_MODULE = "unsigned_module"
    NOT_LIVEPATCH_MODULE = "not_livepatch_module"
    UNKNOWN_SYMBOL = "unknown_symbol"
    COMMON_SYMBOL = "common_symbol"
    BAD_SECTION_NAME = "bad_section_name"
    NOT_LIVEPATCH_SYMBOL = "not_livepatch_symbol"
    BAD_SYMBOL_NAME = "bad_symbol_name"
    VMLINUX_SYMBOL_IN_MODULE_SECTION = "vmlinux_symbol_in_module_section"
    SYMBOL_NOT_FOUND = "symbol_not_found"
    AMBIGUOUS = "ambiguous"
    POSITION_NOT_FOUND = "position_not_found"
    RELOCATION_OVERFLOW = "relocation_overflow"
    RELOCATION_TARGET_NONZERO = "relocation_target_nonzero"
    RELOCATION_TYPE = "relocation_type"
    INVALID_PATCH_TABLE = "invalid_patch_table"
    DUPLICATE_SYSFS_NAME = "duplicate_sysfs_name"
    NO_FTRACE_LOCATION = "no_ftrace_location"


class LoaderCheckKind:
    """The first of each CheckResult.loader_checks ``(check, status, detail)``, in the kernel's
    order; also the second of an open row ``("loader_check", check)``."""

    MODULE_SUPPORT = "module_support"
    SIGNATURE = "signature"
    ELF_HEADER = "elf_header"
    THIS_MODULE = "this_module"
    MODULE_LAYOUT = "module_layout"
    VERMAGIC = "vermagic"
    LIVEPATCH_SUPPORT = "livepatch_support"
    SYMBOL_VERSIONS = "symbol_versions"
    UNRESOLVED_SYMBOLS = "unresolved_symbols"
    RELOCATIONS = "relocations"


class CheckStatus:
    """The second of each CheckResult.loader_checks ``(check, status, detail)``."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_CHECKED = "not_checked"
    NOT_APPLICABLE = "not_applicable"
    NOT_REACHED = "not_reached"


class RelocationStatus:
    """A relocation's ``status`` in CheckResult.json (``relocations``,
    ``ordinary_relocations``)."""

    APPLIED = "applied"
    NEEDS_PLACEMENT = "needs_placement"
    FAILED = "failed"
    NOT_REACHED = "not_reached"
    NONE = "none"


class BindingSource:
    """Binding.source: where the patch names the symbol."""

    FUNCTION = "function"
    RELOCATION = "relocation"


class AsBuilt:
    """Binding.as_built: the binding against the kernel the patch was built for."""

    SAME = "same"
    MOVED = "moved"
    GONE = "gone"
    UNPROVEN = "unproven"
    # This kernel is itself the one taken as built-for (its release is the vermagic's): not
    # proven.
    ASSUMED = "assumed"


class CopyKind:
    """Copy.kind (Kernel.copies, CheckResult.coverage)."""

    OUT_OF_LINE = "out_of_line"
    CLONE = "clone"
    INLINED = "inlined"
    BY_NAME = "by_name"


class CopyStatus:
    """Copy.status in a check's coverage."""

    REPLACED = "replaced"
    NOT_REPLACED = "not_replaced"
    INIT = "init"
    UNKNOWN = "unknown"


class CopyAsBuilt:
    """Copy.as_built in a check's coverage: against the kernel the patch was built for."""

    SAME = "same"
    NEW = "new"


class DriftStatus:
    """DriftRow.status."""

    SAME = "same"
    MOVED = "moved"
    GONE = "gone"
    NEW = "new"
    UNKNOWN = "unknown"


class Outcome:
    """How a run ends (CheckRun.outcome, CheckResult.outcome): the command's exit status 0, 1, 2."""

    OK = "ok"
    NO = "no"
    FAILED = "failed"


class Stage:
    """Problem.stage: when the kernel hits the problem."""

    MODULE_LOAD = "module_load"
    PATCH_ENABLE = "patch_enable"
    MODULE_COMING = "module_coming"


class ErrorKind:
    """Failure.kind: why a kernel could not be opened or checked (the exceptions' kinds)."""

    NOT_FOUND = "not_found"
    BAD_INPUT = "bad_input"
    TOO_LARGE = "too_large"
    IO = "io"
    USAGE = "usage"
    CANCELLED = "cancelled"


# The same values under their first names, kept for the programs that use them.
FOUND = LookupVerdict.FOUND
NOT_FOUND = LookupVerdict.NOT_FOUND
AMBIGUOUS = LookupVerdict.AMBIGUOUS
POSITION_NOT_FOUND = LookupVerdict.POSITION_NOT_FOUND
ACCEPTED = PatchVerdictKind.ACCEPTED
UNVERIFIED = PatchVerdictKind.UNVERIFIED
BINDS_ANOTHER_DEFINITION = PatchVerdictKind.BINDS_ANOTHER_DEFINITION
PARTIAL_COVERAGE = PatchVerdictKind.PARTIAL_COVERAGE
REFUSED_AT_LOAD = PatchVerdictKind.REFUSED_AT_LOAD
REFUSED_WHEN_MODULE_LOADS = PatchVerdictKind.REFUSED_WHEN_MODULE_LOADS
ORDINARY_MODULE = PatchVerdictKind.ORDINARY_MODULE
OUT_OF_LINE = CopyKind.OUT_OF_LINE
CLONE = CopyKind.CLONE
INLINED = CopyKind.INLINED
BY_NAME = CopyKind.BY_NAME
REPLACED = CopyStatus.REPLACED
NOT_REPLACED = CopyStatus.NOT_REPLACED
INIT = CopyStatus.INIT
UNKNOWN = CopyStatus.UNKNOWN
SAME = AsBuilt.SAME
MOVED = AsBuilt.MOVED
GONE = AsBuilt.GONE
UNPROVEN = AsBuilt.UNPROVEN
ASSUMED = AsBuilt.ASSUMED

OK = Outcome.OK
NO = Outcome.NO
FAILED = Outcome.FAILED

__all__ = [name for name in dir() if not name.startswith("_")]
