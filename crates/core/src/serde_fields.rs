//! The field names a params type's `Deserialize` reads, asked once at registration.
//!
//! serde's derive hands a struct's field names to the deserializer (`deserialize_struct`'s
//! `fields`), and reads each field's value by asking for a type. Where every property of
//! a flat schema is one of those names, and no field's value is passed over
//! (`IgnoredAny`) or read any way at all, a field the schema check let through is a
//! field serde reads: `serde_ignored`'s first guard cannot find anything there, and a
//! call need not pay for it (see `Typed::prepare`).

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// The names `P`'s `Deserialize` reads as a struct, or `None` when it does not read
/// itself as one (a map, `flatten`, an enum, a hand-written impl).
pub(crate) fn struct_fields<'de, P: Deserialize<'de>>() -> Option<&'static [&'static str]> {
    let mut fields = None;
    // The probe refuses every read: only what it was told on the way counts.
    let _ = P::deserialize(Probe(&mut fields));
    fields
}

/// Whether `P`'s `Deserialize`, given `field` alone, reads its value as a value: as a
/// scalar, or an option, newtype or sequence of such (one element is asked). A value it
/// passes over (`IgnoredAny`, a `deserialize_with` that discards), reads any way it likes
/// (`deserialize_any`) or reads as a map or struct is not (this is what `serde_ignored`
/// would have caught, or could not vouch for).
pub(crate) fn reads_its_value<'de, P: Deserialize<'de>>(field: &'static str) -> bool {
    let mut read = Read::Unasked;
    let _ = P::deserialize(OneField {
        field: Some(field),
        read: &mut read,
    });
    read == Read::AsValue
}

/// How a field's value was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    Unasked,
    AsValue,
    Otherwise,
}

/// A map of one field whose value is a [`ValueProbe`].
struct OneField<'a> {
    field: Option<&'static str>,
    read: &'a mut Read,
}

impl<'de> Deserializer<'de> for OneField<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map struct
        enum identifier ignored_any
    }
}

impl<'de> de::MapAccess<'de> for OneField<'_> {
    type Error = de::value::Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        match self.field.take() {
            Some(field) => seed
                .deserialize(de::value::BorrowedStrDeserializer::new(field))
                .map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        seed.deserialize(ValueProbe(self.read))
    }
}

/// A value that notes how it is asked to be read, then refuses.
struct ValueProbe<'a>(&'a mut Read);

impl ValueProbe<'_> {
    fn noted<T>(self, read: Read) -> Result<T, de::value::Error> {
        if *self.0 != Read::Otherwise {
            *self.0 = read;
        }
        Err(de::Error::custom("only how a value is read is asked"))
    }
}

macro_rules! read_as_value {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            self.noted(Read::AsValue)
        }
    )*};
}

impl<'de> Deserializer<'de> for ValueProbe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        self.noted(Read::Otherwise)
    }

    read_as_value! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char deserialize_str
        deserialize_string deserialize_unit deserialize_identifier
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_seq(OneElement(Some(self)))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        // A flat schema only lets a string through here: a unit variant, no data.
        self.noted(Read::AsValue)
    }

    serde::forward_to_deserialize_any! {
        bytes byte_buf unit_struct tuple tuple_struct map struct
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        self.noted(Read::Otherwise)
    }
}

/// A sequence of one element, asked of the same probe.
struct OneElement<'a>(Option<ValueProbe<'a>>);

impl<'de> de::SeqAccess<'de> for OneElement<'_> {
    type Error = de::value::Error;

    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        match self.0.take() {
            Some(probe) => seed.deserialize(probe).map(Some),
            None => Ok(None),
        }
    }
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

    fn discard<'de, D: serde::Deserializer<'de>>(d: D) -> Result<(), D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| ())
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Values {
        text: String,
        number: Option<u32>,
        list: Vec<Option<String>>,
        nested_list: Vec<Vec<bool>>,
        #[serde(deserialize_with = "String::deserialize")]
        with: String,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Passes {
        a: String,
        ignored: serde::de::IgnoredAny,
        #[serde(deserialize_with = "discard")]
        discarded: (),
        listed: Vec<serde::de::IgnoredAny>,
        any: serde_json::Value,
        map: std::collections::BTreeMap<String, String>,
        inner: Values,
    }

    #[test]
    fn each_field_says_whether_its_value_is_read_as_a_value() {
        for field in ["text", "number", "list", "nested_list", "with"] {
            assert!(super::reads_its_value::<Values>(field), "{field}");
        }
        assert!(super::reads_its_value::<Passes>("a"));
        for field in ["ignored", "discarded", "listed", "any", "map", "inner"] {
            assert!(!super::reads_its_value::<Passes>(field), "{field}");
        }
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
