//! `Config::from_json` on arbitrary text: `Ok` with a config that passes `validate` and
//! round-trips through `to_json`, or a typed `ConfigError`; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessel_model::{ArenaPlan, Config};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = Config::from_json(text) {
        config
            .validate()
            .expect("from_json returned an invalid config");
        let again = Config::from_json(&config.to_json()).expect("to_json output parses");
        assert_eq!(again, config);
        // A valid config plans its arena without overflow (sizes only; nothing is allocated).
        let plan = ArenaPlan::new(&config).expect("a valid config plans its arena");
        assert!(plan.total_bytes() >= plan.total_f32());
    }
});
