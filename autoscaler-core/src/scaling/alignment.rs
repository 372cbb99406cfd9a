//! Aligning a computed parallelism to the number of key groups or source partitions (the
//! reference's `ParallelismAligner`, `BuiltInAlignmentMode` and the deprecated
//! `KeyGroupOrPartitionsAdjustMode`, anchor §2.5).
//!
//! The region helpers on [`AlignmentContext`] are public so that custom
//! [`ParallelismAlignmentMode`](crate::plugins::ParallelismAlignmentMode)s can build on them, as the
//! reference exposes them on `ParallelismAligner`.

use crate::config::AlignmentMode;

/// One vertex's alignment problem. All values are Java `int`s in the reference; `i64` here so no
/// intermediate can overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlignmentContext {
    /// Current parallelism.
    pub current: i64,
    /// The clamped target (`min(max(lower, ceil(sf * current)), min(max_parallelism, upper))`), != current.
    pub target: i64,
    /// Source partition count; `<= 0` = unknown / not a source.
    pub num_source_partitions: i64,
    /// Max parallelism (key groups).
    pub max_parallelism: i64,
    /// `min(current, vertex.min-parallelism)`.
    pub lower_limit: i64,
    /// `max(current, vertex.max-parallelism)`.
    pub upper_limit: i64,
    /// Whether some input edge is HASH (a keyed vertex).
    pub has_hash_input: bool,
}

/// The aligned parallelism and, for the legacy modes, the `ScalingLimited` event's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlignmentResult {
    /// The parallelism to use (may equal `current`, which cancels the change).
    pub parallelism: i64,
    /// `(expected, actual)` when a legacy mode limited the change and the reference emits
    /// `ScalingLimited`.
    pub limited: Option<(i64, i64)>,
}

impl AlignmentContext {
    /// `N`: the source partitions if known, else the key groups.
    pub fn num_key_groups_or_partitions(&self) -> i64 {
        if self.num_source_partitions <= 0 {
            self.max_parallelism
        } else {
            self.num_source_partitions
        }
    }

    /// The alignment cap `min(N, max_parallelism, upper_limit)`.
    pub fn upper_bound_for_alignment(&self) -> i64 {
        self.num_key_groups_or_partitions()
            .min(self.max_parallelism.min(self.upper_limit))
    }

    /// Whether the target is above the current parallelism.
    pub fn is_scale_up(&self) -> bool {
        self.target > self.current
    }

    /// Default `isApplicable`: sources with a known partition count and keyed vertices only.
    pub fn is_applicable(&self) -> bool {
        self.num_source_partitions > 0 || self.has_hash_input
    }

    /// Scans the direction's region upward from the target for the first divisor of `N` (or, when
    /// `accept_load_reducing`, the first value that lowers the per-subtask share `N / p`); 0 when
    /// there is none. The region is `[target, cap]` for a scale-up and `[target, min(current, cap)]`
    /// for a scale-down.
    pub fn first_aligned_in_region(&self, accept_load_reducing: bool) -> i64 {
        let n = self.num_key_groups_or_partitions();
        let target = self.target;
        let region_end = if self.is_scale_up() {
            self.upper_bound_for_alignment()
        } else {
            self.current.min(self.upper_bound_for_alignment())
        };
        // A non-positive target only arises from nonsensical limits (the reference divides by zero there).
        if target <= 0 {
            return 0;
        }
        // The reference scans `target..=region_end` one by one: with a prime N near 2^31 and a high
        // upper limit that is billions of steps. The first hit of either test has a closed form
        // (the smallest divisor of N at or above the target, in O(sqrt N); the first p where the
        // share N / p drops), so the answer is the same without the scan.
        let share_at_target = n / target;
        let divisor = smallest_divisor_at_least(n, target);
        // For N > 0 and share s >= 1, floor(N / p) < s first holds at p = floor(N / s) + 1; for
        // N <= 0 or s = 0 it never holds (truncating division only grows towards 0).
        let load_reducing = (accept_load_reducing && n > 0 && share_at_target > 0).then(|| n / share_at_target + 1);
        [divisor, load_reducing]
            .into_iter()
            .flatten()
            .filter(|&p| p <= region_end)
            .min()
            .unwrap_or(0)
    }

    /// The legacy relaxed fallback: walk down from the target to where the per-subtask share grows,
    /// snap up to a divisor, then respect the lower limit.
    fn relaxed_downward_fallback(&self) -> i64 {
        let n = self.num_key_groups_or_partitions();
        let target = self.target;
        if target <= 0 {
            return self.lower_limit.max(0);
        }
        // The walk down stops at the largest p <= target with floor(N / p) > floor(N / target) = s,
        // that is p = floor(N / (s + 1)) (for N > 0); it runs out at 0 when there is none.
        let share_at_target = n / target;
        let p = if n > 0 { n / (share_at_target + 1) } else { 0 };
        let p = if p > 0 && n % p != 0 { p + 1 } else { p };
        p.max(self.lower_limit)
    }

    /// The legacy blocking rule: a candidate that inverts the direction blocks (returns current);
    /// any deviation from the target is reported.
    fn blocking_fallback(&self, candidate: i64) -> AlignmentResult {
        let inverts =
            (self.is_scale_up() && candidate <= self.current) || (!self.is_scale_up() && candidate >= self.current);
        if inverts {
            return AlignmentResult {
                parallelism: self.current,
                limited: Some((self.target, self.current)),
            };
        }
        AlignmentResult {
            parallelism: candidate,
            limited: (candidate != self.target).then_some((self.target, candidate)),
        }
    }
}

/// The smallest `p >= from` (with `from >= 1`) dividing `n`, by trial division up to `sqrt(|n|)`
/// (at most 65 536 steps for the `u32` counts a topology holds). Every `p` divides 0.
fn smallest_divisor_at_least(n: i64, from: i64) -> Option<i64> {
    let m = n.unsigned_abs();
    let from = u64::try_from(from).ok()?.max(1);
    if m == 0 {
        return i64::try_from(from).ok();
    }
    let mut best: Option<u64> = None;
    let mut i = 1u64;
    while i <= m / i {
        if m.is_multiple_of(i) {
            for d in [i, m / i] {
                if d >= from && best.is_none_or(|b| d < b) {
                    best = Some(d);
                }
            }
        }
        i += 1;
    }
    best.and_then(|b| i64::try_from(b).ok())
}

/// Aligns `ctx.target` under `mode` (anchor §2.5). Built-in modes never block and never report;
/// the legacy modes may fall back, block (return `current`) and report `ScalingLimited`.
///
/// ```
/// use autoscaler_core::scaling::{AlignmentContext, align};
/// use autoscaler_core::config::AlignmentMode;
/// let ctx = AlignmentContext { current: 16, target: 24, num_source_partitions: 0, max_parallelism: 128,
///     lower_limit: 1, upper_limit: 200, has_hash_input: true };
/// assert_eq!(align(AlignmentMode::Balanced, &ctx).parallelism, 26);
/// assert_eq!(align(AlignmentMode::EvenlySpread, &ctx).parallelism, 32);
/// ```
pub fn align(mode: AlignmentMode, ctx: &AlignmentContext) -> AlignmentResult {
    let keep = |parallelism| AlignmentResult {
        parallelism,
        limited: None,
    };
    if !ctx.is_applicable() {
        return keep(ctx.target);
    }
    let or_target = |aligned: i64| if aligned > 0 { aligned } else { ctx.target };
    match mode {
        AlignmentMode::Off => keep(ctx.target),
        AlignmentMode::Balanced => keep(or_target(ctx.first_aligned_in_region(true))),
        AlignmentMode::EvenlySpread => keep(or_target(ctx.first_aligned_in_region(false))),
        AlignmentMode::LegacyEvenlySpread | AlignmentMode::LegacyMaximizeUtilisation => {
            let maximize = mode == AlignmentMode::LegacyMaximizeUtilisation;
            let aligned = ctx.first_aligned_in_region(maximize);
            if aligned > 0 {
                keep(aligned)
            } else {
                ctx.blocking_fallback(ctx.relaxed_downward_fallback())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keyed(current: i64, target: i64, max_parallelism: i64) -> AlignmentContext {
        AlignmentContext {
            current,
            target,
            num_source_partitions: 0,
            max_parallelism,
            lower_limit: 1,
            upper_limit: i64::from(i32::MAX),
            has_hash_input: true,
        }
    }

    fn source(current: i64, target: i64, partitions: i64, max_parallelism: i64, upper: i64) -> AlignmentContext {
        AlignmentContext {
            current,
            target,
            num_source_partitions: partitions,
            max_parallelism,
            lower_limit: 1,
            upper_limit: upper,
            has_hash_input: false,
        }
    }

    #[test]
    fn balanced_accepts_load_reducing_evenly_spread_only_divisors() {
        // anchor §2.5: N=128, cur 16, target 24.
        let ctx = keyed(16, 24, 128);
        assert_eq!(align(AlignmentMode::Balanced, &ctx).parallelism, 26); // 128/26 = 4 < 128/24 = 5
        assert_eq!(align(AlignmentMode::EvenlySpread, &ctx).parallelism, 32);
        assert_eq!(align(AlignmentMode::Off, &ctx).parallelism, 24);
        // N=720, target 7: 720/8 = 90 < 720/7 = 102, and 8 divides 720 anyway.
        assert_eq!(align(AlignmentMode::Balanced, &keyed(4, 7, 720)).parallelism, 8);
    }

    #[test]
    fn legacy_evenly_spread_matches_vertex_scaler_vectors() {
        // anchor §2.4 (legacy EVENLY_SPREAD): (16 -> 24, N 128) gives 32; (200 -> 260, N 720) gives 360.
        assert_eq!(
            align(AlignmentMode::LegacyEvenlySpread, &keyed(16, 24, 128)).parallelism,
            32
        );
        assert_eq!(
            align(AlignmentMode::LegacyEvenlySpread, &keyed(200, 260, 720)).parallelism,
            360
        );
        // (cur 6, sf 0.8 -> target 5, N 36): region [5, 6] holds 6 only -> 6 = current = no change.
        let result = align(AlignmentMode::LegacyEvenlySpread, &keyed(6, 5, 36));
        assert_eq!(result.parallelism, 6);
    }

    #[test]
    fn legacy_mode_blocks_and_reports_where_built_ins_keep_target() {
        // N=35 partitions, cur 22, target 25, upper 30: region [25, 30] has no divisor of 35.
        let ctx = source(22, 25, 35, 128, 30);
        assert_eq!(
            align(AlignmentMode::Balanced, &ctx),
            AlignmentResult {
                parallelism: 25,
                limited: None
            }
        );
        assert_eq!(align(AlignmentMode::EvenlySpread, &ctx).parallelism, 25);
        // Fallback: walk down from 25 to 17 (35/17 = 2 > 35/25 = 1), 35 % 17 != 0 -> 18 <= 22 inverts.
        assert_eq!(
            align(AlignmentMode::LegacyEvenlySpread, &ctx),
            AlignmentResult {
                parallelism: 22,
                limited: Some((25, 22))
            }
        );
    }

    #[test]
    fn legacy_fallback_deviates_with_event() {
        // N=12, cur 5, target 7, cap 8: built-ins keep 7 (no divisor in [7, 8], 12/8 = 1 = 12/7).
        let ctx = source(5, 7, 12, 8, 8);
        assert_eq!(align(AlignmentMode::Balanced, &ctx).parallelism, 7);
        // Fallback: 12/6 = 2 > 1 at p = 6, 12 % 6 == 0 -> 6 (> current 5) with an event.
        assert_eq!(
            align(AlignmentMode::LegacyEvenlySpread, &ctx),
            AlignmentResult {
                parallelism: 6,
                limited: Some((7, 6))
            }
        );
        // N=200 partitions, maxPar 128, cur 80, sf 1.4 -> target 112; region [112, 128] has no
        // divisor of 200; fallback walks to 100 (200/100 = 2 > 200/112 = 1), a divisor.
        let ctx = source(80, 112, 200, 128, 200);
        assert_eq!(
            align(AlignmentMode::LegacyEvenlySpread, &ctx),
            AlignmentResult {
                parallelism: 100,
                limited: Some((112, 100))
            }
        );
    }

    #[test]
    fn balanced_scale_down_may_return_current() {
        // anchor §2.5 (b): N=128, cur 6, target 5 -> region [5, 6]; 128/6 = 21 < 128/5 = 25.
        assert_eq!(align(AlignmentMode::Balanced, &keyed(6, 5, 128)).parallelism, 6);
    }

    #[test]
    fn rebalance_only_vertices_are_never_aligned() {
        let ctx = AlignmentContext {
            has_hash_input: false,
            ..keyed(16, 24, 128)
        };
        for mode in [
            AlignmentMode::Balanced,
            AlignmentMode::EvenlySpread,
            AlignmentMode::LegacyEvenlySpread,
        ] {
            assert_eq!(align(mode, &ctx).parallelism, 24);
        }
    }

    /// The reference's scan, one candidate at a time: the closed forms must give the same answer.
    fn scanned_first_aligned(ctx: &AlignmentContext, accept_load_reducing: bool) -> i64 {
        let n = ctx.num_key_groups_or_partitions();
        let end = if ctx.is_scale_up() {
            ctx.upper_bound_for_alignment()
        } else {
            ctx.current.min(ctx.upper_bound_for_alignment())
        };
        if ctx.target <= 0 {
            return 0;
        }
        let share = n / ctx.target;
        (ctx.target..=end)
            .find(|&p| n % p == 0 || (accept_load_reducing && n / p < share))
            .unwrap_or(0)
    }

    fn scanned_relaxed(ctx: &AlignmentContext) -> i64 {
        let (n, target) = (ctx.num_key_groups_or_partitions(), ctx.target);
        if target <= 0 {
            return ctx.lower_limit.max(0);
        }
        let mut p = target;
        while p > 0 {
            if n / p > n / target {
                if n % p != 0 {
                    p += 1;
                }
                break;
            }
            p -= 1;
        }
        p.max(ctx.lower_limit)
    }

    #[test]
    fn a_prime_near_2_pow_32_aligns_without_scanning() {
        // 4294967291 is the largest prime below 2^32: its only divisor in the region is itself, which
        // the scan reached after 4.3 billion steps (seconds per vertex). BALANCED stops where the
        // share drops: share = floor(4294967291 / 1000) = 4294967, and the first p with a smaller
        // share is floor(4294967291 / 4294967) + 1 = 1000 + 1 = 1001.
        let n = 4_294_967_291;
        let ctx = AlignmentContext {
            current: 500,
            target: 1000,
            num_source_partitions: 0,
            max_parallelism: n,
            lower_limit: 1,
            upper_limit: n,
            has_hash_input: true,
        };
        let started = std::time::Instant::now();
        assert_eq!(align(AlignmentMode::EvenlySpread, &ctx).parallelism, n);
        assert_eq!(align(AlignmentMode::Balanced, &ctx).parallelism, 1001);
        assert_eq!(align(AlignmentMode::LegacyEvenlySpread, &ctx).parallelism, n);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }

    proptest! {
        #[test]
        fn closed_forms_match_the_scan(
            n in 1i64..3000,
            partitions in prop_oneof![Just(0i64), 1i64..600],
            current in 1i64..400,
            target in -2i64..700,
            lower in 1i64..50,
            upper in 1i64..800,
            hash in any::<bool>(),
        ) {
            let ctx = AlignmentContext {
                current,
                target,
                num_source_partitions: partitions,
                max_parallelism: n,
                lower_limit: lower,
                upper_limit: upper,
                has_hash_input: hash,
            };
            for accept in [false, true] {
                prop_assert_eq!(ctx.first_aligned_in_region(accept), scanned_first_aligned(&ctx, accept));
            }
            prop_assert_eq!(ctx.relaxed_downward_fallback(), scanned_relaxed(&ctx));
        }
    }

    proptest! {
        #[test]
        fn evenly_spread_divides_n_when_the_region_holds_a_divisor(
            current in 1i64..300, target in 1i64..300, max_parallelism in 1i64..1000, partitions in 0i64..400,
        ) {
            prop_assume!(current != target);
            let ctx = AlignmentContext {
                current, target, num_source_partitions: partitions, max_parallelism,
                lower_limit: 1, upper_limit: 200.max(current), has_hash_input: true,
            };
            let n = ctx.num_key_groups_or_partitions();
            let end = if target > current { ctx.upper_bound_for_alignment() } else { current.min(ctx.upper_bound_for_alignment()) };
            let region_has_divisor = (target..=end).any(|p| n % p == 0);
            let result = align(AlignmentMode::EvenlySpread, &ctx);
            prop_assert!(result.limited.is_none());
            if region_has_divisor {
                prop_assert_eq!(n % result.parallelism, 0);
                prop_assert!(result.parallelism >= target && result.parallelism <= end);
            } else {
                prop_assert_eq!(result.parallelism, target);
            }
        }

        #[test]
        fn built_in_modes_never_invert_the_direction(
            current in 1i64..300, target in 1i64..300, max_parallelism in 1i64..1000, partitions in 0i64..400,
        ) {
            prop_assume!(current != target);
            let ctx = AlignmentContext {
                current, target, num_source_partitions: partitions, max_parallelism,
                lower_limit: 1, upper_limit: 200.max(current), has_hash_input: false,
            };
            for mode in [AlignmentMode::Balanced, AlignmentMode::EvenlySpread] {
                let p = align(mode, &ctx).parallelism;
                if target > current { prop_assert!(p > current); } else { prop_assert!(p <= current && p >= target); }
            }
        }
    }
}
