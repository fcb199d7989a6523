//! `Config::from_json` on arbitrary text: `Ok` with a config that passes `validate` and
//! round-trips through `to_json`, or a typed `ConfigError`; never a panic. Loading a weights
//! file that holds no tensors with any accepted config must fail with `Missing` before the
//! model allocates anything its config declares (caught by `-malloc_limit_mb`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessel_model::{ArenaPlan, Config, LoadError, Model};

/// A valid safetensors file with no tensors: header length 2, header `{}`.
const EMPTY_FILE: &[u8] = b"\x02\0\0\0\0\0\0\0{}";

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
        let loaded = Model::from_safetensors_bytes(config, EMPTY_FILE);
        assert!(
            matches!(loaded, Err(LoadError::Missing { .. })),
            "{loaded:?}"
        );
    }
});
