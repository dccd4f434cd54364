//! Copies of functions as Python objects: where a function's code lives (`Kernel.copies`)
//! and a check's coverage of every function a patch replaces (`CheckResult.coverage`).

use pyo3::prelude::*;

use crate::kinds::kind_name;

/// One place a function's code lives; in a check's coverage, whether the patch replaces it.
#[pyclass(module = "klpsym", name = "Copy", frozen, get_all)]
#[derive(Clone)]
pub struct CodeCopy {
    /// `out_of_line`, `clone`, `inlined`, `by_name`.
    pub kind: String,
    /// The symbol whose code it is (its own, or the function it is inlined into).
    pub symbol: Option<String>,
    /// That symbol's position (old_sympos) among its name's definitions in the object.
    pub position: Option<u64>,
    /// Where the copy starts in that symbol.
    pub offset: Option<u64>,
    /// Its entry address (vmlinux), as the kernel's table gives it.
    pub address: Option<u64>,
    /// A module's copy: its section.
    pub section: Option<String>,
    /// Other symbols its code starts (a `.cold` part).
    pub parts: Vec<String>,
    /// The inline functions it is inlined through, innermost first.
    pub through: Vec<String>,
    /// An inlined copy's call site, `file:line`.
    pub call_site: Option<String>,
    /// Init code, freed after start.
    pub init: bool,
    /// Bytes of code.
    pub bytes: u64,
    /// In a check's coverage: `replaced`, `not_replaced`, `init`, `unknown`; else None.
    pub status: Option<String>,
    /// In a check's coverage: what to replace to cover it (`name,pos`), when not replaced.
    pub patch: Option<String>,
    /// In a check's coverage: the replaced function covering it (`name,pos`).
    pub replaced_by: Option<String>,
    /// In a check's coverage, against the built-for kernel: `same` or `new`.
    pub as_built: Option<String>,
}

impl From<klpsym::Copy> for CodeCopy {
    fn from(c: klpsym::Copy) -> CodeCopy {
        CodeCopy {
            kind: kind_name(&c.kind),
            symbol: c.symbol,
            position: c.position,
            offset: c.offset,
            address: c.address,
            section: c.section,
            parts: c.parts,
            through: c.through,
            call_site: c.call_site,
            init: c.init,
            bytes: c.bytes,
            status: None,
            patch: None,
            replaced_by: None,
            as_built: None,
        }
    }
}

impl From<klpsym::CoveredCopy> for CodeCopy {
    fn from(c: klpsym::CoveredCopy) -> CodeCopy {
        CodeCopy {
            status: Some(kind_name(&c.status)),
            patch: c.patch,
            replaced_by: c.replaced_by,
            as_built: c.as_built.as_ref().map(kind_name),
            ..CodeCopy::from(c.copy)
        }
    }
}

#[pymethods]
impl CodeCopy {
    fn __repr__(&self) -> String {
        format!(
            "<Copy {} {},{}{}>",
            self.kind,
            self.symbol.as_deref().unwrap_or("?"),
            self.position.map_or("?".to_string(), |p| p.to_string()),
            self.status
                .as_ref()
                .map_or(String::new(), |s| format!(" {s}"))
        )
    }
}

/// One function as DWARF defines it, with every copy of its code.
#[pyclass(module = "klpsym", frozen, get_all)]
#[derive(Clone)]
pub struct Definition {
    /// Its name.
    pub name: String,
    /// `vmlinux` or a module.
    pub object: String,
    /// Its compilation unit's source file.
    pub file: String,
    /// The file that declares it (a header for a `static inline` function).
    pub decl_file: Option<String>,
    /// Its declaration line.
    pub decl_line: Option<u64>,
    /// Every copy: a list of Copy.
    pub copies: Vec<CodeCopy>,
    /// What could not be read (the list may miss copies).
    pub incomplete: Vec<String>,
}

impl From<klpsym::Definition> for Definition {
    fn from(d: klpsym::Definition) -> Definition {
        Definition {
            name: d.name,
            object: d.object,
            file: d.file,
            decl_file: d.decl_file,
            decl_line: d.decl_line,
            copies: d.copies.into_iter().map(CodeCopy::from).collect(),
            incomplete: d.incomplete,
        }
    }
}

#[pymethods]
impl Definition {
    fn __repr__(&self) -> String {
        format!(
            "<Definition {} in {} ({} copies)>",
            self.name,
            self.file,
            self.copies.len()
        )
    }
}

/// Every copy of one function a patch replaces, on one kernel.
#[pyclass(module = "klpsym", frozen, get_all)]
#[derive(Clone)]
pub struct Coverage {
    /// `vmlinux` or a module.
    pub object: String,
    /// The function replaced (old_name).
    pub name: String,
    /// The position the patch gives (old_sympos).
    pub sympos: u64,
    /// The definition it binds (`fs/inode.c:432`).
    pub definition: Option<String>,
    /// Every copy, each with its `status`.
    pub copies: Vec<CodeCopy>,
    /// Copies only the built-for kernel has.
    pub gone: Vec<CodeCopy>,
    /// Why its copies were not checked.
    pub unchecked: Option<String>,
    /// What could not be read.
    pub incomplete: Vec<String>,
}

impl From<klpsym::FunctionCoverage> for Coverage {
    fn from(f: klpsym::FunctionCoverage) -> Coverage {
        Coverage {
            object: f.object,
            name: f.name,
            sympos: f.sympos,
            definition: f.definition,
            copies: f.copies.into_iter().map(CodeCopy::from).collect(),
            gone: f.gone.into_iter().map(CodeCopy::from).collect(),
            unchecked: f.unchecked,
            incomplete: f.incomplete,
        }
    }
}

#[pymethods]
impl Coverage {
    /// The copies the patch does not replace.
    #[getter]
    fn not_replaced(&self) -> Vec<CodeCopy> {
        self.copies
            .iter()
            .filter(|c| c.status.as_deref() == Some("not_replaced"))
            .cloned()
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "<Coverage {}:{},{}: {} copies, {} not replaced>",
            self.object,
            self.name,
            self.sympos,
            self.copies.len(),
            self.not_replaced().len()
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CodeCopy>()?;
    m.add_class::<Definition>()?;
    m.add_class::<Coverage>()?;
    Ok(())
}
