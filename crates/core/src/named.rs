//! Enums whose variants each have a fixed name (a code, a mode, a hook), declared once.

/// Declares a fieldless enum with each variant's name beside it: `as_str` gives the name
/// and `ALL` lists the variants in order.
macro_rules! named {
    (
        $(#[$meta:meta])*
        pub enum $name:ident as $doc:literal {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every variant, in order.
            pub const ALL: [Self; [$($text),+].len()] = [$(Self::$variant),+];

            #[doc = $doc]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }
        }
    };
}
