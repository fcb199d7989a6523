//! Which instruction-set level runs the kernels.
//!
//! The level is detected once at run time, without `std`, and cached. On x86-64 a level is only
//! reported when the CPU has every instruction it needs *and* the OS saves the matching vector
//! registers (checked through XGETBV by `cpufeatures`): a kernel never executes an instruction
//! the machine would fault on.
//!
//! Every kernel takes an [`Isa`]: a level that has been proven to run here. It can only be
//! obtained through [`Isa::best`], [`Isa::scalar`], [`Isa::new`] (an error for a level the CPU
//! lacks) or [`Isa::supported`], so holding one is the proof that the level's instructions are
//! safe to execute. Tests and benchmarks force a level by passing the one they want.

use core::fmt;
use core::sync::atomic::{AtomicU8, Ordering};

/// An instruction-set level a kernel can be compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// Portable scalar code: always available, the fallback and the baseline.
    Scalar,
    /// x86-64 AVX2 with FMA and F16C (256-bit vectors).
    Avx2,
    /// x86-64 AVX-512 F+BW+CD+DQ+VL (512-bit vectors).
    Avx512,
    /// AArch64 Advanced SIMD (128-bit vectors).
    Neon,
}

impl Level {
    /// Every level, in the order tests report them.
    pub const ALL: [Level; 4] = [Level::Scalar, Level::Avx2, Level::Avx512, Level::Neon];

    /// The lower-case name used by `TESSEL_ISA` and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
            Level::Neon => "neon",
        }
    }

    /// Parses a level name as written in `TESSEL_ISA` (case-insensitive, surrounding blanks
    /// ignored).
    pub fn parse(text: &str) -> Result<Level, IsaError> {
        let text = text.trim();
        Level::ALL
            .into_iter()
            .find(|level| level.name().eq_ignore_ascii_case(text))
            .ok_or(IsaError::UnknownName)
    }

    /// Number of `f32` lanes in one vector register at this level.
    pub const fn f32_lanes(self) -> usize {
        match self {
            Level::Scalar => 1,
            Level::Avx2 => 8,
            Level::Avx512 => 16,
            Level::Neon => 4,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an instruction-set level cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsaError {
    /// The name is not one of `scalar`, `avx2`, `avx512`, `neon`.
    UnknownName,
    /// This CPU (or its OS) cannot run the requested level.
    Unsupported(Level),
}

impl fmt::Display for IsaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IsaError::UnknownName => {
                f.write_str("unknown ISA level name (expected scalar, avx2, avx512 or neon)")
            }
            IsaError::Unsupported(level) => {
                write!(
                    f,
                    "the ISA level `{level}` is not supported by this CPU or OS"
                )
            }
        }
    }
}

impl core::error::Error for IsaError {}

/// The CPU features the kernels care about, as detected on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CpuFeatures {
    /// AVX2, FMA, F16C (and the BMI/LZCNT/POPCNT that come with x86-64-v3), with YMM state
    /// saved by the OS.
    pub avx2: bool,
    /// AVX-512 F, BW, CD, DQ and VL, with ZMM and opmask state saved by the OS.
    pub avx512: bool,
    /// AVX-512 BF16 (`vdpbf16ps`), on top of `avx512`.
    pub avx512_bf16: bool,
    /// AArch64 Advanced SIMD.
    pub neon: bool,
    /// AVX-512 VNNI (`vpdpbusd` on 512-bit vectors), on top of `avx512`.
    pub avx512_vnni: bool,
    /// AVX-VNNI (the VEX-encoded `vpdpbusd` on 256-bit vectors), on top of `avx2`.
    pub avx_vnni: bool,
    /// The AArch64 dot-product extension (`sdot`), on top of `neon`.
    pub neon_dotprod: bool,
}

impl CpuFeatures {
    /// Whether `level` can run here.
    pub const fn supports(self, level: Level) -> bool {
        match level {
            Level::Scalar => true,
            Level::Avx2 => self.avx2,
            Level::Avx512 => self.avx512,
            Level::Neon => self.neon,
        }
    }

    /// Detects the features of the running CPU. Prefer [`cpu_features`], which caches this.
    pub fn detect() -> CpuFeatures {
        detect::run()
    }

    const fn to_bits(self) -> u8 {
        (self.avx2 as u8)
            | (self.avx512 as u8) << 1
            | (self.avx512_bf16 as u8) << 2
            | (self.neon as u8) << 3
            | (self.avx512_vnni as u8) << 4
            | (self.avx_vnni as u8) << 5
            | (self.neon_dotprod as u8) << 6
    }

    const fn from_bits(bits: u8) -> CpuFeatures {
        CpuFeatures {
            avx2: bits & 1 != 0,
            avx512: bits & 2 != 0,
            avx512_bf16: bits & 4 != 0,
            neon: bits & 8 != 0,
            avx512_vnni: bits & 16 != 0,
            avx_vnni: bits & 32 != 0,
            neon_dotprod: bits & 64 != 0,
        }
    }
}

/// The features of this CPU, detected on the first call and cached for the process.
pub fn cpu_features() -> CpuFeatures {
    const UNKNOWN: u8 = u8::MAX;
    static CACHE: AtomicU8 = AtomicU8::new(UNKNOWN);
    match CACHE.load(Ordering::Relaxed) {
        UNKNOWN => {
            let features = CpuFeatures::detect();
            CACHE.store(features.to_bits(), Ordering::Relaxed);
            features
        }
        bits => CpuFeatures::from_bits(bits),
    }
}

/// A [`Level`] proven to run on this machine: the token every kernel takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Isa {
    level: Level,
}

impl Isa {
    /// The fastest level this machine runs.
    pub fn best() -> Isa {
        let features = cpu_features();
        let level = [Level::Avx512, Level::Avx2, Level::Neon]
            .into_iter()
            .find(|&level| features.supports(level))
            .unwrap_or(Level::Scalar);
        Isa { level }
    }

    /// The portable scalar level, available everywhere.
    pub const fn scalar() -> Isa {
        Isa {
            level: Level::Scalar,
        }
    }

    /// Forces `level`: an error, never an illegal instruction, when this machine lacks it.
    pub fn new(level: Level) -> Result<Isa, IsaError> {
        if cpu_features().supports(level) {
            Ok(Isa { level })
        } else {
            Err(IsaError::Unsupported(level))
        }
    }

    /// Parses a `TESSEL_ISA` value and forces that level.
    pub fn from_name(name: &str) -> Result<Isa, IsaError> {
        Isa::new(Level::parse(name)?)
    }

    /// Every level this machine runs, scalar first.
    pub fn supported() -> impl Iterator<Item = Isa> + Clone {
        let features = cpu_features();
        Level::ALL
            .into_iter()
            .filter(move |&level| features.supports(level))
            .map(|level| Isa { level })
    }

    /// The level this token stands for.
    pub const fn level(self) -> Level {
        self.level
    }

    /// Whether AVX-512 BF16 dot products may be used with this token (AVX-512 level on a CPU
    /// that has them).
    pub fn has_avx512_bf16(self) -> bool {
        self.level == Level::Avx512 && cpu_features().avx512_bf16
    }

    /// Whether AVX-512 VNNI may be used with this token (AVX-512 level on a CPU that has it).
    pub fn has_avx512_vnni(self) -> bool {
        self.level == Level::Avx512 && cpu_features().avx512_vnni
    }

    /// Whether AVX-VNNI may be used with this token (AVX2 or AVX-512 level on a CPU that has
    /// it).
    pub fn has_avx_vnni(self) -> bool {
        matches!(self.level, Level::Avx2 | Level::Avx512) && cpu_features().avx_vnni
    }

    /// Whether the AArch64 dot-product instructions may be used with this token (NEON level on
    /// a CPU that has them).
    pub fn has_neon_dotprod(self) -> bool {
        self.level == Level::Neon && cpu_features().neon_dotprod
    }

    /// Runs `op` with the pulp SIMD token of this level.
    ///
    /// `op`'s body is instantiated once per level with that level's target features enabled;
    /// mark the generic kernel body `#[inline(always)]` so it is compiled for them.
    #[inline]
    pub fn dispatch<Op: pulp::WithSimd>(self, op: Op) -> Op::Output {
        match self.level {
            #[cfg(target_arch = "x86_64")]
            Level::Avx512 => {
                // SAFETY: an `Isa` at `Avx512` is only built after `cpu_features` found
                // AVX-512 F/BW/CD/DQ/VL and OS-saved ZMM state, plus everything in x86-64-v3,
                // which is every feature `V4` enables.
                let simd = unsafe { pulp::x86::V4::new_unchecked() };
                pulp::Simd::vectorize(simd, op)
            }
            #[cfg(target_arch = "x86_64")]
            Level::Avx2 => {
                // SAFETY: an `Isa` at `Avx2` is only built after `cpu_features` found AVX2, FMA,
                // F16C, BMI1/2, LZCNT, POPCNT and SSE up to 4.2 with OS-saved YMM state: every
                // feature `V3` and `with_v3_f16c` enable.
                unsafe { with_v3_f16c(pulp::x86::V3::new_unchecked(), op) }
            }
            #[cfg(target_arch = "aarch64")]
            Level::Neon => {
                // SAFETY: Advanced SIMD is part of the AArch64 baseline that every
                // aarch64 target Rust supports assumes, and `cpu_features` reports it only there.
                let simd = unsafe { pulp::aarch64::Neon::new_unchecked() };
                pulp::Simd::vectorize(simd, op)
            }
            _ => op.with_simd(pulp::Scalar::new()),
        }
    }
}

/// Runs `op` with the `V3` token in a function compiled for `V3`'s features plus F16C.
///
/// pulp's own `V3::vectorize` leaves F16C out, so `vcvtph2ps` (used by the `f16` weight
/// widening) would not inline into code instantiated for `V3`. Everything `op` inlines is
/// compiled here, with F16C enabled, and the `V3` token is the proof the kernels check for it.
///
/// # Safety
/// The CPU must have every feature listed (the `Avx2` level's detection checks them all).
#[cfg(target_arch = "x86_64")]
#[target_feature(
    enable = "sse,sse2,fxsr,sse3,ssse3,sse4.1,sse4.2,popcnt,avx,avx2,bmi1,bmi2,fma,lzcnt,f16c"
)]
#[inline]
unsafe fn with_v3_f16c<Op: pulp::WithSimd>(simd: pulp::x86::V3, op: Op) -> Op::Output {
    op.with_simd(simd)
}

impl Default for Isa {
    fn default() -> Isa {
        Isa::best()
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.level.name())
    }
}

// Under Miri, CPUID (inline assembly) cannot run: only the scalar level is reported there.
#[cfg(all(target_arch = "x86_64", not(miri)))]
mod detect {
    use super::CpuFeatures;
    use core::arch::x86_64::{__cpuid_count, CpuidResult};

    // Features whose registers the OS must save: cpufeatures checks XGETBV for these.
    cpufeatures::new!(
        v3_checked, "avx", "avx2", "fma", "bmi1", "bmi2", "popcnt", "sse4.2", "sse4.1", "ssse3",
        "sse3"
    );
    cpufeatures::new!(v4_checked, "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl");

    fn cpuid(leaf: u32, sub_leaf: u32) -> CpuidResult {
        // SAFETY: CPUID exists on every x86-64 CPU; querying an unknown leaf returns zeros
        // (or the highest basic leaf), never faults. Newer toolchains make this call safe.
        #[allow(unused_unsafe)]
        unsafe {
            __cpuid_count(leaf, sub_leaf)
        }
    }

    pub(super) fn run() -> CpuFeatures {
        let max_leaf = cpuid(0, 0).eax;
        let max_extended_leaf = cpuid(0x8000_0000, 0).eax;
        let f16c = cpuid(1, 0).ecx & (1 << 29) != 0;
        let lzcnt = max_extended_leaf >= 0x8000_0001 && cpuid(0x8000_0001, 0).ecx & (1 << 5) != 0;
        let avx2 = v3_checked::get() && f16c && lzcnt;
        let avx512 = avx2 && v4_checked::get();
        let avx512_bf16 = avx512 && max_leaf >= 7 && cpuid(7, 1).eax & (1 << 5) != 0;
        // VNNI needs no register state beyond its vector width's, checked above.
        let avx512_vnni = avx512 && max_leaf >= 7 && cpuid(7, 0).ecx & (1 << 11) != 0;
        let avx_vnni = avx2 && max_leaf >= 7 && cpuid(7, 1).eax & (1 << 4) != 0;
        CpuFeatures {
            avx2,
            avx512,
            avx512_bf16,
            neon: false,
            avx512_vnni,
            avx_vnni,
            neon_dotprod: false,
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod detect {
    use super::CpuFeatures;

    pub(super) fn run() -> CpuFeatures {
        CpuFeatures {
            neon: true,
            neon_dotprod: dotprod(),
            ..CpuFeatures::default()
        }
    }

    /// The dot-product extension, as the Linux kernel reports it in the auxiliary vector
    /// (`HWCAP_ASIMDDP`): the kernel only sets it when user space may execute `sdot`.
    #[cfg(target_os = "linux")]
    fn dotprod() -> bool {
        const AT_HWCAP: core::ffi::c_ulong = 16;
        const HWCAP_ASIMDDP: core::ffi::c_ulong = 1 << 20;
        extern "C" {
            fn getauxval(kind: core::ffi::c_ulong) -> core::ffi::c_ulong;
        }
        // SAFETY: `getauxval` (glibc and musl) only reads the process's auxiliary vector and
        // returns 0 for an unknown entry; it takes and returns plain integers.
        unsafe { getauxval(AT_HWCAP) & HWCAP_ASIMDDP != 0 }
    }

    /// Elsewhere the extension is not detected: the kernels fall back to plain NEON.
    #[cfg(not(target_os = "linux"))]
    fn dotprod() -> bool {
        false
    }
}

#[cfg(not(any(all(target_arch = "x86_64", not(miri)), target_arch = "aarch64")))]
mod detect {
    use super::CpuFeatures;

    pub(super) fn run() -> CpuFeatures {
        CpuFeatures::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_is_always_supported_and_listed_first() {
        assert_eq!(Isa::supported().next(), Some(Isa::scalar()));
        assert_eq!(Isa::new(Level::Scalar), Ok(Isa::scalar()));
    }

    #[test]
    fn forcing_a_missing_level_is_an_error() {
        let features = cpu_features();
        for level in Level::ALL {
            match Isa::new(level) {
                Ok(isa) => assert!(features.supports(level) && isa.level() == level),
                Err(err) => {
                    assert!(!features.supports(level));
                    assert_eq!(err, IsaError::Unsupported(level));
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            Isa::new(Level::Neon),
            Err(IsaError::Unsupported(Level::Neon))
        );
        #[cfg(target_arch = "aarch64")]
        assert_eq!(
            Isa::new(Level::Avx2),
            Err(IsaError::Unsupported(Level::Avx2))
        );
    }

    #[test]
    fn names_round_trip() {
        for level in Level::ALL {
            assert_eq!(Level::parse(level.name()), Ok(level));
        }
        assert_eq!(Level::parse(" AVX512 "), Ok(Level::Avx512));
        assert_eq!(Level::parse("sse"), Err(IsaError::UnknownName));
    }

    #[test]
    fn best_is_the_widest_supported() {
        let best = Isa::best();
        assert!(Isa::supported().all(|isa| isa.level().f32_lanes() <= best.level().f32_lanes()));
    }

    #[test]
    fn features_cache_round_trips() {
        let f = CpuFeatures::detect();
        assert_eq!(CpuFeatures::from_bits(f.to_bits()), f);
        assert_eq!(cpu_features(), f);
    }

    #[test]
    fn dispatch_runs_at_the_requested_width() {
        struct Lanes;
        impl pulp::WithSimd for Lanes {
            type Output = usize;
            #[inline(always)]
            fn with_simd<S: pulp::Simd>(self, _: S) -> usize {
                S::F32_LANES
            }
        }
        for isa in Isa::supported() {
            assert_eq!(isa.dispatch(Lanes), isa.level().f32_lanes(), "{isa}");
        }
    }
}
