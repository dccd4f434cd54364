//! The library's kinds as Python sees them: their JSON names, one rule for every answer.

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
