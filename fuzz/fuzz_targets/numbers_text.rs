//! The embedded numbers model of the `tessel` command (`tessel --text TEXT`) on arbitrary text
//! (bytes read as UTF-8, invalid sequences replaced): `Numbers::check` and `Reader::read` agree,
//! refusing exactly the texts with a character outside the vocabulary, an empty text or one
//! over the length limit with the same typed `TextError`; every accepted text is encoded and
//! greedy-decoded within the step limit. Never a panic, never another error.
#![no_main]

use std::cell::RefCell;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tessel_kernels::Isa;
use tessel_numbers::{Numbers, NumbersError, Reader};

/// The model, loaded once from the bytes compiled into the target.
fn numbers() -> &'static Numbers {
    static NUMBERS: OnceLock<Numbers> = OnceLock::new();
    NUMBERS.get_or_init(|| Numbers::embedded().expect("the embedded model loads"))
}

thread_local! {
    /// One session, reused by every input (as the command reuses it for every text).
    static READER: RefCell<Reader<'static>> =
        RefCell::new(numbers().reader(Isa::best()).expect("a session"));
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let checked = numbers().check(&text);
    READER.with_borrow_mut(|reader| match reader.read(&text) {
        Ok(reading) => {
            assert_eq!(checked, Ok(()), "{text:?} read but refused by check");
            assert!(reading.steps >= 1 && reading.steps <= numbers().max_steps());
            assert!(reading.total >= reading.encode);
        }
        Err(NumbersError::Text(e)) => assert_eq!(checked, Err(e), "{text:?}"),
        Err(e) => panic!("{text:?}: {e}"),
    });
});
