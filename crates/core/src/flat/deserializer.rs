//! [`FlatArgs`] as a serde `Deserializer`: each method answers as serde_json's
//! `impl Deserializer for &Value` does for the object the fields parse to (its keys, and
//! its strings, booleans and null), or fails where that would take work not mirrored
//! here, and the validate stage then reads the value.

use std::borrow::Cow;

use serde::de::value::Error;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};

use super::{FlatArgs, Scalar};

/// Methods that fail with [`not_mirrored`]: the validate stage then reads the value.
/// Each is named with the types of its arguments between the receiver and the visitor.
macro_rules! fails {
    ($($method:ident($($arg:ty),*))*) => {
        $(fn $method<V: Visitor<'de>>(self, $(_: $arg,)* _visitor: V) -> Result<V::Value, Error> {
            Err(not_mirrored())
        })*
    };
}

/// The two methods the object and a field's value answer alike, as `&Value` does: a
/// newtype is read from itself (serde_json's raw value is not mirrored), and a value
/// passed over is a unit.
macro_rules! newtype_and_ignored_any {
    () => {
        fn deserialize_newtype_struct<V: Visitor<'de>>(
            self,
            name: &'static str,
            visitor: V,
        ) -> Result<V::Value, Error> {
            if is_raw_value(name) {
                return Err(not_mirrored());
            }
            visitor.visit_newtype_struct(self)
        }

        fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            visitor.visit_unit()
        }
    };
}

/// The object, as `&Value`'s `Object` answers: a map whatever is asked, but for an
/// option (`Some` of it) and a newtype (itself); anything else fails.
impl<'de> de::Deserializer<'de> for &'de FlatArgs<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let mut fields = Fields {
            rest: self.fields().iter(),
            value: None,
        };
        let out = visitor.visit_map(&mut fields)?;
        if fields.rest.len() == 0 {
            Ok(out)
        } else {
            Err(de::Error::invalid_length(
                self.len,
                &"fewer elements in map",
            ))
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_any(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    newtype_and_ignored_any!();

    fails! {
        deserialize_bool() deserialize_i8() deserialize_i16() deserialize_i32()
        deserialize_i64() deserialize_i128() deserialize_u8() deserialize_u16()
        deserialize_u32() deserialize_u64() deserialize_u128() deserialize_f32()
        deserialize_f64() deserialize_char() deserialize_str() deserialize_string()
        deserialize_bytes() deserialize_byte_buf() deserialize_unit() deserialize_seq()
        deserialize_identifier() deserialize_unit_struct(&'static str)
        deserialize_tuple(usize) deserialize_tuple_struct(&'static str, usize)
        deserialize_enum(&'static str, &'static [&'static str])
    }
}

/// The error for what this reader does not mirror: the value path reads it instead.
fn not_mirrored() -> Error {
    de::Error::custom("not read from flat arguments")
}

/// Whether a newtype is serde_json's raw value, which `&Value` reads as the value's
/// text (its name is serde_json's private token).
fn is_raw_value(name: &str) -> bool {
    name.starts_with("$serde_json")
}

/// The fields in key order, as `&Value`'s map hands them out.
struct Fields<'de, 'a> {
    rest: std::slice::Iter<'de, (Cow<'a, str>, Scalar<'a>)>,
    value: Option<&'de Scalar<'a>>,
}

impl<'de> MapAccess<'de> for Fields<'de, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.rest.next() else {
            return Ok(None);
        };
        self.value = Some(value);
        seed.deserialize(Key(key)).map(Some)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(value),
            None => Err(de::Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.rest.len())
    }
}

/// A key, as `&Value`'s map key answers for a string (borrowed); the numeric and other
/// readings of a key fail.
struct Key<'de>(&'de str);

impl<'de> de::Deserializer<'de> for Key<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.0)
    }

    serde::forward_to_deserialize_any! {
        char str string bytes byte_buf identifier ignored_any
    }

    fails! {
        deserialize_bool() deserialize_i8() deserialize_i16() deserialize_i32()
        deserialize_i64() deserialize_i128() deserialize_u8() deserialize_u16()
        deserialize_u32() deserialize_u64() deserialize_u128() deserialize_f32()
        deserialize_f64() deserialize_option() deserialize_unit() deserialize_seq()
        deserialize_map() deserialize_unit_struct(&'static str)
        deserialize_newtype_struct(&'static str) deserialize_tuple(usize)
        deserialize_tuple_struct(&'static str, usize)
        deserialize_struct(&'static str, &'static [&'static str])
        deserialize_enum(&'static str, &'static [&'static str])
    }
}

/// A field's value, as `&Value` answers for a string, a boolean or null, method by
/// method (serde_json's `impl Deserializer for &Value`).
impl<'de> de::Deserializer<'de> for &'de Scalar<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Scalar::Null => visitor.visit_unit(),
            Scalar::Bool(b) => visitor.visit_bool(*b),
            Scalar::Str(s) => visitor.visit_borrowed_str(s),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Scalar::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self {
            // `&Value` reads a string as a unit variant named by it (serde's own string
            // deserializer for the variant, which only a unit variant accepts).
            Scalar::Str(s) => {
                visitor.visit_enum(IntoDeserializer::<Error>::into_deserializer(&**s))
            }
            _ => Err(not_mirrored()),
        }
    }

    newtype_and_ignored_any!();

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Scalar::Bool(b) => visitor.visit_bool(*b),
            _ => Err(not_mirrored()),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Scalar::Str(s) => visitor.visit_borrowed_str(s),
            _ => Err(not_mirrored()),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Scalar::Null => visitor.visit_unit(),
            _ => Err(not_mirrored()),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fails! {
        deserialize_i8() deserialize_i16() deserialize_i32() deserialize_i64()
        deserialize_i128() deserialize_u8() deserialize_u16() deserialize_u32()
        deserialize_u64() deserialize_u128() deserialize_f32() deserialize_f64()
        deserialize_seq() deserialize_map() deserialize_tuple(usize)
        deserialize_tuple_struct(&'static str, usize)
        deserialize_struct(&'static str, &'static [&'static str])
    }
}
