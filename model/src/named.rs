//! [`named_set!`]: a struct of one value per named field, declared once. The arena's buffers are
//! declared with it (a block's working buffers in `layers::block`, the other regions and the
//! search state's parts in `plan`), so their sizes, their places in the arena, the views
//! carved from it, the region names and how many regions there are all come from one
//! declaration's fields, in its order.

/// Declares `struct Name<T>` with one public `T` per listed field, its field count `LEN`, and,
/// all in declaration order: `map` (a set of other values, field by field), `zip_with`, and
/// `for_each_named` (each field's region name and value, and whether it is optional).
///
/// A field marked `(optional)` is one that some models leave empty (the plan lists it only when
/// it is not). `names ["a", "b"]` after the struct's name names its fields `a.field` in the
/// first place the set is used and `b.field` in the second (`for_each_named(0, ..)` and
/// `for_each_named(1, ..)`); without it, fields are named as they are spelled.
macro_rules! named_set {
    (@optional) => {
        false
    };
    (@optional optional) => {
        true
    };
    (@names [$($field:ident),+]) => {
        &[&[$(stringify!($field)),+]]
    };
    (@names $fields:tt $($prefix:literal),+) => {
        &[$($crate::named::named_set!(@prefixed $prefix $fields)),+]
    };
    (@prefixed $prefix:literal [$($field:ident),+]) => {
        &[$(concat!($prefix, ".", stringify!($field))),+]
    };
    (
        $(#[doc = $doc:literal])*
        $vis:vis struct $name:ident<T> $(names [$($prefix:literal),+])? {
            $( $(#[doc = $field_doc:literal])* $field:ident $(($flag:ident))? ),+ $(,)?
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        $vis struct $name<T> {
            $( $(#[doc = $field_doc])* pub $field: T, )+
        }

        // Not every set uses every operation.
        #[allow(dead_code)]
        impl<T> $name<T> {
            /// How many fields the set has.
            pub const LEN: usize = [$(stringify!($field)),+].len();

            /// Every field through `f`, in declaration order.
            pub fn map<U>(self, mut f: impl FnMut(T) -> U) -> $name<U> {
                $name { $( $field: f(self.$field), )+ }
            }

            /// Every field of `self` and of `other` through `f`, in declaration order.
            pub fn zip_with<U, V>(self, other: $name<U>, mut f: impl FnMut(T, U) -> V) -> $name<V> {
                $name { $( $field: f(self.$field, other.$field), )+ }
            }

            /// Calls `f` with every field's name (in naming `place`, see the declaration),
            /// value and whether it is optional, in declaration order.
            pub fn for_each_named(&self, place: usize, mut f: impl FnMut(&'static str, &T, bool)) {
                const NAMES: &[&[&str]] =
                    $crate::named::named_set!(@names [$($field),+] $($($prefix),+)?);
                let mut names = NAMES.get(place).copied().unwrap_or(&[]).iter();
                $(
                    let name = names.next().copied().unwrap_or(stringify!($field));
                    f(name, &self.$field, $crate::named::named_set!(@optional $($flag)?));
                )+
            }
        }
    };
}

pub(crate) use named_set;
