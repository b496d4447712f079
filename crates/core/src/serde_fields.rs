//! The field names a params type's `Deserialize` reads, asked once at registration.
//!
//! serde's derive hands a struct's field names to the deserializer (`deserialize_struct`'s
//! `fields`). Where every property of a flat schema is one of them, a field the schema
//! check let through is a field serde reads: `serde_ignored`'s first guard cannot find
//! anything there, and a call need not pay for it (see `Typed::prepare`).

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// The names `P`'s `Deserialize` reads as a struct, or `None` when it does not read
/// itself as one (a map, `flatten`, an enum, a hand-written impl).
pub(crate) fn struct_fields<'de, P: Deserialize<'de>>() -> Option<&'static [&'static str]> {
    let mut fields = None;
    // The probe refuses every read: only what it was told on the way counts.
    let _ = P::deserialize(Probe(&mut fields));
    fields
}

/// A deserializer that notes a struct's field names and refuses to read anything.
struct Probe<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only a struct's field names are asked"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        self.deserialize_any(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
        identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::struct_fields;
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[allow(dead_code)]
    #[serde(rename_all = "camelCase")]
    struct Plain {
        user_name: String,
        #[serde(default)]
        note: Option<String>,
        #[serde(skip)]
        hidden: u8,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Flattened {
        a: u8,
        #[serde(flatten)]
        rest: std::collections::BTreeMap<String, u8>,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    #[serde(untagged)]
    enum Either {
        A { a: u8 },
        B { b: u8 },
    }

    #[test]
    fn a_struct_names_the_fields_it_reads() {
        assert_eq!(struct_fields::<Plain>(), Some(&["userName", "note"][..]));
    }

    #[test]
    fn anything_else_names_none() {
        assert_eq!(struct_fields::<Flattened>(), None);
        assert_eq!(struct_fields::<Either>(), None);
        assert_eq!(
            struct_fields::<std::collections::BTreeMap<String, u8>>(),
            None
        );
        assert_eq!(struct_fields::<serde_json::Value>(), None);
    }
}
