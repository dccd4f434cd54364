//! The library's kinds as Python sees them: their JSON names, one rule for every answer, and
//! every name of each kind, which `klpsym/__init__.py`'s constants are held to (the package's
//! test `test_kinds.py` compares them with [`kind_names`]).

use pyo3::prelude::*;
use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use serde::Serialize;

/// A kind's JSON name (`accepted`, `symbol_not_found`, ...): what Python sees.
pub(crate) fn kind_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| match v {
            serde_json::Value::String(s) => Some(s),
            serde_json::Value::Object(m) => {
                m.get("status").and_then(|s| s.as_str()).map(str::to_string)
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// The serde names of every variant of the enum `T`, in declaration order: the list its
/// derived `Deserialize` hands to `deserialize_enum` (what serde itself accepts, after
/// `rename_all`), caught by a deserializer that reads nothing else.
fn variant_names<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Catch(Option<&'static [&'static str]>);

    impl<'de> de::Deserializer<'de> for &mut Catch {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not an enum"))
        }

        fn deserialize_enum<V: Visitor<'de>>(
            self,
            _name: &'static str,
            variants: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = Some(variants);
            Err(de::Error::custom("variants caught"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map struct
            identifier ignored_any
        }
    }

    let mut catch = Catch(None);
    // The error is the point: the variants were caught on the way.
    let _ = T::deserialize(&mut catch);
    catch.0.unwrap_or(&[])
}

/// Every value of the unit-variant enum `T`, each read back from its serde name.
fn every<T: DeserializeOwned>() -> Vec<T> {
    variant_names::<T>()
        .iter()
        .filter_map(|n| {
            let d: de::value::StrDeserializer<'_, de::value::Error> = (*n).into_deserializer();
            T::deserialize(d).ok()
        })
        .collect()
}

/// The names Python sees of every value of `T` ([`kind_name`]).
fn names<T: DeserializeOwned + Serialize>() -> Vec<String> {
    every::<T>().iter().map(kind_name).collect()
}

/// `Binding.as_built`'s names: [`klpsym::AsBuilt`] carries data, so the library lists its
/// status names itself (a unit test there holds the list to every variant's serde tag).
fn as_built_names() -> Vec<String> {
    klpsym::AsBuilt::STATUSES
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Every kind Python returns as a string, as `(constants class in klpsym, every name)`: the
/// library's own names, for the test that holds `klpsym/__init__.py` to them.
#[pyfunction]
#[pyo3(name = "_kind_names")]
pub(crate) fn kind_names() -> Vec<(&'static str, Vec<String>)> {
    vec![
        (
            "SourceKind",
            // JSON and Python name a source kind by `as_str`, not by its serde name.
            every::<klpsym::SourceKind>()
                .into_iter()
                .map(|k| k.as_str().to_string())
                .collect(),
        ),
        ("Level", names::<klpsym::Level>()),
        ("LookupVerdict", names::<klpsym::LookupVerdict>()),
        ("PatchVerdictKind", names::<klpsym::PatchVerdictKind>()),
        ("ProblemKind", names::<klpsym::ProblemKind>()),
        ("LoaderCheckKind", names::<klpsym::LoaderCheckKind>()),
        ("CheckStatus", names::<klpsym::CheckStatus>()),
        ("RelocationStatus", names::<klpsym::RelocationStatus>()),
        ("BindingSource", names::<klpsym::BindingSource>()),
        ("AsBuilt", as_built_names()),
        ("CopyKind", names::<klpsym::CopyKind>()),
        ("CopyStatus", names::<klpsym::CopyStatus>()),
        ("CopyAsBuilt", names::<klpsym::CopyAsBuilt>()),
        ("DriftStatus", names::<klpsym::DriftStatus>()),
        ("Outcome", names::<klpsym::Outcome>()),
        (
            "Stage",
            klpsym::Stage::NAMES.iter().map(|s| s.to_string()).collect(),
        ),
        ("ErrorKind", names::<klpsym::ErrorKind>()),
    ]
}
