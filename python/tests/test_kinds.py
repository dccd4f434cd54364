"""The constants of each kind are the library's own names: every value of the Rust enum of
that name, and nothing else (a kind added or renamed in Rust fails here until the class
follows)."""

import pathlib

import klpsym
from klpsym import _klpsym


def _constants(group):
    return {k: v for k, v in vars(group).items() if not k.startswith("_")}


def test_each_kind_class_holds_every_name_of_its_rust_enum():
    groups = dict(_klpsym._kind_names())
    # SourceKind, Level, LookupVerdict, PatchVerdictKind, ProblemKind, LoaderCheckKind,
    # CheckStatus, RelocationStatus, BindingSource, AsBuilt, CopyKind, CopyStatus,
    # CopyAsBuilt, DriftStatus, Outcome, Stage, ErrorKind.
    assert len(groups) == 17, sorted(groups)
    for name, rust in groups.items():
        assert len(rust) >= 2 and len(set(rust)) == len(rust), (name, rust)
        mine = _constants(getattr(klpsym, name))
        assert sorted(mine.values()) == sorted(rust), name
        for const, value in mine.items():
            assert const == value.upper(), (name, const, value)
    assert len(groups["ProblemKind"]) >= 24 and len(groups["LoaderCheckKind"]) == 10


def test_the_first_flat_names_are_their_classes_values():
    flat = {
        "LookupVerdict": ["FOUND", "NOT_FOUND", "AMBIGUOUS", "POSITION_NOT_FOUND"],
        "PatchVerdictKind": [
            "ACCEPTED", "UNVERIFIED", "BINDS_ANOTHER_DEFINITION", "PARTIAL_COVERAGE",
            "REFUSED_AT_LOAD", "REFUSED_WHEN_MODULE_LOADS", "ORDINARY_MODULE",
        ],
        "CopyKind": ["OUT_OF_LINE", "CLONE", "INLINED", "BY_NAME"],
        "CopyStatus": ["REPLACED", "NOT_REPLACED", "INIT", "UNKNOWN"],
        "AsBuilt": ["SAME", "MOVED", "GONE", "UNPROVEN", "ASSUMED"],
        "Outcome": ["OK", "NO", "FAILED"],
    }
    for group, names in flat.items():
        for n in names:
            assert getattr(klpsym, n) == getattr(getattr(klpsym, group), n), n


def test_the_type_stubs_name_every_constant():
    stub = (pathlib.Path(klpsym.__file__).parent / "__init__.pyi").read_text()
    groups = dict(_klpsym._kind_names())
    for name in groups:
        body = stub.split(f"\nclass {name}:\n", 1)
        assert len(body) == 2, f"no class {name} in the stubs"
        listed = body[1].split("\n\n", 1)[0]
        for const in _constants(getattr(klpsym, name)):
            assert f"    {const}: str" in listed, (name, const)
    for n in [n for n in dir(klpsym) if n.isupper()]:
        assert f"\n{n}: str\n" in stub, n
