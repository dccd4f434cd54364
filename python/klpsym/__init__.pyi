"""Type stubs for klpsym (the extension module klpsym._klpsym)."""

from os import PathLike
from typing import Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

_Path = Union[str, "PathLike[str]"]

__version__: str

class SourceKind:
    KALLSYMS: str
    SYSTEM_MAP: str
    VMLINUX_ELF: str
    KERNEL_IMAGE: str
    MODULE: str

class Level:
    NOTE: str
    WARNING: str
    ERROR: str

class Outcome:
    OK: str
    NO: str
    FAILED: str

class Stage:
    MODULE_LOAD: str
    PATCH_ENABLE: str
    MODULE_COMING: str

class ErrorKind:
    NOT_FOUND: str
    BAD_INPUT: str
    TOO_LARGE: str
    IO: str
    USAGE: str
    CANCELLED: str

class LookupVerdict:
    FOUND: str
    NOT_FOUND: str
    AMBIGUOUS: str
    POSITION_NOT_FOUND: str

class PatchVerdictKind:
    ACCEPTED: str
    UNVERIFIED: str
    BINDS_ANOTHER_DEFINITION: str
    PARTIAL_COVERAGE: str
    REFUSED_AT_LOAD: str
    REFUSED_WHEN_MODULE_LOADS: str
    ORDINARY_MODULE: str

class ProblemKind:
    MODULES_UNSUPPORTED: str
    ELF_HEADER: str
    THIS_MODULE: str
    VERMAGIC_MISMATCH: str
    SYMBOL_VERSION_MISMATCH: str
    LIVEPATCH_DISABLED: str
    FORCE_LOAD_REQUIRED: str
    UNSIGNED_MODULE: str
    NOT_LIVEPATCH_MODULE: str
    UNKNOWN_SYMBOL: str
    COMMON_SYMBOL: str
    BAD_SECTION_NAME: str
    NOT_LIVEPATCH_SYMBOL: str
    BAD_SYMBOL_NAME: str
    VMLINUX_SYMBOL_IN_MODULE_SECTION: str
    SYMBOL_NOT_FOUND: str
    AMBIGUOUS: str
    POSITION_NOT_FOUND: str
    RELOCATION_OVERFLOW: str
    RELOCATION_TARGET_NONZERO: str
    RELOCATION_TYPE: str
    INVALID_PATCH_TABLE: str
    DUPLICATE_SYSFS_NAME: str
    NO_FTRACE_LOCATION: str

class LoaderCheckKind:
    MODULE_SUPPORT: str
    SIGNATURE: str
    ELF_HEADER: str
    THIS_MODULE: str
    MODULE_LAYOUT: str
    VERMAGIC: str
    LIVEPATCH_SUPPORT: str
    SYMBOL_VERSIONS: str
    UNRESOLVED_SYMBOLS: str
    RELOCATIONS: str

class CheckStatus:
    PASSED: str
    FAILED: str
    NOT_CHECKED: str
    NOT_APPLICABLE: str
    NOT_REACHED: str

class RelocationStatus:
    APPLIED: str
    NEEDS_PLACEMENT: str
    FAILED: str
    NOT_REACHED: str
    NONE: str

class BindingSource:
    FUNCTION: str
    RELOCATION: str

class AsBuilt:
    SAME: str
    MOVED: str
    GONE: str
    UNPROVEN: str
    ASSUMED: str

class CopyKind:
    OUT_OF_LINE: str
    CLONE: str
    INLINED: str
    BY_NAME: str

class CopyStatus:
    REPLACED: str
    NOT_REPLACED: str
    INIT: str
    UNKNOWN: str

class CopyAsBuilt:
    SAME: str
    NEW: str

class DriftStatus:
    SAME: str
    MOVED: str
    GONE: str
    NEW: str
    UNKNOWN: str

FOUND: str
NOT_FOUND: str
AMBIGUOUS: str
POSITION_NOT_FOUND: str
ACCEPTED: str
UNVERIFIED: str
BINDS_ANOTHER_DEFINITION: str
PARTIAL_COVERAGE: str
REFUSED_AT_LOAD: str
REFUSED_WHEN_MODULE_LOADS: str
ORDINARY_MODULE: str
OUT_OF_LINE: str
CLONE: str
INLINED: str
BY_NAME: str
REPLACED: str
NOT_REPLACED: str
INIT: str
UNKNOWN: str
SAME: str
MOVED: str
GONE: str
UNPROVEN: str
ASSUMED: str

class Error(Exception): ...
class NotFoundError(Error): ...
class BadInputError(Error): ...
class TooLargeError(Error): ...
class IoError(Error): ...
class UsageError(Error): ...
class CancelledError(Error): ...

class Candidate:
    position: int
    address: Optional[int]
    type: str
    size: Optional[int]
    object: str
    unplaced: bool
    file: Optional[str]
    line: Optional[int]
    decl_file: Optional[str]

class Lookup:
    verdict: str
    address: Optional[int]
    position: Optional[int]
    count: int
    message: Optional[str]
    file_note: Optional[str]
    candidates: List[Candidate]
    def __bool__(self) -> bool: ...

class NameMatch:
    name: str
    count: int
    objects: List[str]

class Symbol:
    name: str
    address: int
    offset: int
    size: Optional[int]
    module: Optional[str]
    text: str

class SourceFrame:
    function: Optional[str]
    file: Optional[str]
    line: Optional[int]
    discriminator: Optional[int]

class Kernel:
    path: str
    kind: str
    release: Optional[str]
    build_id: Optional[str]
    arch: Optional[str]
    notes: List[Tuple[str, str]]
    has_line_tables: bool
    def __len__(self) -> int: ...
    def sympos(self, name: str, *, object: Optional[str] = None, file: Optional[str] = None) -> List[Candidate]: ...
    def lookup(self, name: str, *, sympos: int = 0, object: Optional[str] = None, file: Optional[str] = None) -> Lookup: ...
    def search(self, pattern: str, *, object: Optional[str] = None, limit: int = 200, duplicates: bool = False) -> List[NameMatch]: ...
    def symbolize(self, address: int, *, return_address: bool = False) -> Optional[Symbol]: ...
    def symbolize_batch(self, addresses: Sequence[int]) -> List[Optional[Symbol]]: ...
    def source_lines(self, address: int, *, return_address: bool = False) -> List[SourceFrame]: ...
    def source_lines_batch(self, addresses: Sequence[int], *, return_address: bool = False) -> List[List[SourceFrame]]: ...
    def describe(self, address: int) -> str: ...
    def resolve(self, name: str, offset: int = 0, *, size: Optional[int] = None, module: Optional[str] = None) -> List[int]: ...
    def copies(self, name: str, *, file: Optional[str] = None, object: Optional[str] = None) -> List[Definition]: ...

class Copy:
    kind: str
    symbol: Optional[str]
    position: Optional[int]
    offset: Optional[int]
    address: Optional[int]
    section: Optional[str]
    parts: List[str]
    through: List[str]
    call_site: Optional[str]
    init: bool
    bytes: int
    status: Optional[str]
    patch: Optional[str]
    replaced_by: Optional[str]
    as_built: Optional[str]

class Definition:
    name: str
    object: str
    file: str
    decl_file: Optional[str]
    decl_line: Optional[int]
    copies: List[Copy]
    incomplete: List[str]

class Coverage:
    object: str
    name: str
    sympos: int
    definition: Optional[str]
    copies: List[Copy]
    gone: List[Copy]
    unchecked: Optional[str]
    incomplete: List[str]
    not_replaced: List[Copy]

class Patch:
    path: str
    objects: List[str]
    vermagic: Optional[str]
    built_for_release: Optional[str]
    def __init__(self, path: _Path) -> None: ...

class Problem:
    kind: str
    stage: str
    module: Optional[str]
    log: List[str]
    errno: int
    reached: bool
    symbol: Optional[str]
    hint: str
    candidates: List[Candidate]

class Binding:
    source: str
    object: str
    name: str
    sympos: int
    definitions: int
    bound: Optional[Candidate]
    identity: Optional[Tuple[str, int]]
    as_built: Optional[str]
    as_built_detail: Optional[str]

class CheckResult:
    kernel: str
    verdict: str
    errno: Optional[int]
    unchecked: List[str]
    unchecked_coverage: List[str]
    open: List[Tuple[str, str]]
    problems: List[Problem]
    kernel_log: List[str]
    bindings: List[Binding]
    coverage: List[Coverage]
    partial_coverage: bool
    loader_checks: List[Tuple[str, str, str]]
    json: str
    text: str
    refused: bool
    outcome: str

class Failure:
    kernel: str
    kind: str
    error: str

class CheckRun:
    results: List[CheckResult]
    failed: List[Failure]
    outcome: str
    exit_code: int

class DriftRow:
    identity: Optional[Tuple[str, int]]
    from_position: Optional[int]
    to_position: Optional[int]
    status: str

class Drift:
    name: str
    object: str
    rows: List[DriftRow]
    moved: bool

class FleetIter(Iterator[Union[CheckResult, Failure]]):
    def __next__(self) -> Union[CheckResult, Failure]: ...

def open(source: _Path, *, cache_dir: Optional[_Path] = None, no_cache: bool = False, modules: Optional[_Path] = None, debug_vmlinux: Optional[_Path] = None, yield_cpu: bool = False, kernel_version: Optional[str] = None) -> Kernel: ...
def open_running(*, no_cache: bool = False, yield_cpu: bool = False) -> Kernel: ...
def open_all(sources: Sequence[_Path], *, cache_dir: Optional[_Path] = None, no_cache: bool = False, modules: Optional[_Path] = None, yield_cpu: bool = False) -> Tuple[List[Kernel], List[Failure], List[Tuple[str, str]]]: ...
def check(patch: Patch, kernels: Sequence[Kernel], *, built_for: Optional[_Path] = None, force: bool = False, btf: Optional[_Path] = None, section_bases: Optional[Union[Mapping[str, int], Iterable[Tuple[str, int]]]] = None, strict: bool = False) -> CheckRun: ...
def drift(from_kernel: Kernel, to_kernel: Kernel, name: str, *, object: str = "vmlinux") -> Drift: ...
def fleet(patch: Patch, sources: Sequence[_Path], *, shard: Optional[str] = None, jobs: int = 1, built_for: Optional[_Path] = None, force: bool = False, cache_dir: Optional[_Path] = None, no_cache: bool = False, strict: bool = False) -> FleetIter: ...

OK: str
NO: str
FAILED: str
