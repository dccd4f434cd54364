//! Builders for klpsym's tests, fuzz seeds and benchmarks — never part of the product
//! (`publish = false`; no product crate depends on it except as a dev-dependency).
//!
//! - [`elf`]: small relocatable and executable ELF objects (`object::write`).
//! - [`module`]: livepatch modules from a [`module::ModSpec`] (modinfo, `struct module`,
//!   `klp_patch` → `klp_object[]` → `klp_func[]`, relocations), and target tables.
//! - [`patches`]: the same at real sizes (tens of thousands of relocations).
//! - [`btf`]: BTF with the klp structs a target kernel describes.
//! - [`kallsyms`]: the kernel's compressed kallsyms tables of every era.
//! - [`packages`]: `.deb` and RPM packages around kernel files.
//! - [`klog`]: the one reader of a lab guest's kernel log (marker-bracketed steps, noise).
//! - [`lab`]: the real-kernel lab's inputs as scripts/test.sh hands them over, and the
//!   accounting of what a test could not judge.
//! - [`tools`]: the independent tools' outputs, kept between runs by input identity.

pub mod btf;
pub mod elf;
pub mod kallsyms;
pub mod klog;
pub mod lab;
pub mod module;
pub mod packages;
pub mod patches;
pub mod tools;
