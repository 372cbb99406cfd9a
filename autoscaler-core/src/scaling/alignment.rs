//! Aligning a computed parallelism to the number of key groups or source partitions (the
//! reference's `ParallelismAligner`, `BuiltInAlignmentMode` and the deprecated
//! `KeyGroupOrPartitionsAdjustMode`, anchor §2.5).
//!
//! The region helpers on [`AlignmentContext`] are public so that custom
//! [`ParallelismAlignmentMode`](crate::plugins::ParallelismAlignmentMode)s can build on them, as the
//! reference exposes them on `ParallelismAligner`.
//!
//! # Where this differs from the reference 1.16: the partition cap
//!
//! The reference 1.16 can scale a source above its partition count: every subtask past the
//! count gets no split and idles, with everything chained to it. With 15 partitions, current
//! parallelism 100 and max parallelism 180, 1.16's BALANCED turns a computed 180 into 180 and a
//! computed 50 into 50, and its legacy modes block the first at 100. The reference fixed this after
//! 1.16 (FLINK-40389, apache/flink-kubernetes-operator PR #1179); this module has that fix, as the
//! one home of the rule ([`PartitionCap::Enforced`], the default):
//! * `BALANCED` and `EVENLY_SPREAD`: when the direction's region holds no aligned parallelism,
//!   the result is `min(target, alignment cap)` instead of the target;
//! * the legacy modes (`scaling.key-group.partitions.adjust.mode`): when the target is above the
//!   alignment cap, the relaxed downward candidate is the result (reported as `ScalingLimited`)
//!   instead of the direction check that kept the current parallelism.
//!
//! Below the cap nothing changes, `OFF` is unchanged, and a custom alignment mode keeps its own
//! say (the vertex scaler uses its answer as it is). Keyed vertices are not affected: their
//! alignment cap is `min(max parallelism, upper limit)`, which the target never exceeds.
//! `job.autoscaler.compat.reference-1-16: true` selects [`PartitionCap::Reference116`], the 1.16
//! answers.

use crate::config::AlignmentMode;
#[cfg(doc)]
use crate::config::AutoScalerOptions;

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

/// Whether alignment keeps a target above the alignment cap `min(N, max parallelism, upper limit)`
/// (the reference 1.16) or caps it (the reference's later fix FLINK-40389, apache/flink-kubernetes-operator
/// PR #1179; replay §3.5.1).
///
/// In 1.16 a source can be scaled above its partition count, and every subtask past it idles. With
/// the cap, when the target lies above the alignment cap:
/// * `BALANCED` and `EVENLY_SPREAD` give `min(target, cap)` where the region holds no aligned
///   parallelism (1.16: the target);
/// * the legacy modes give the relaxed downward candidate, reported as `ScalingLimited` (1.16: the
///   current parallelism when that candidate inverts the scaling direction).
///
/// Below the cap both rules agree; `OFF` never aligns. Keyed vertices never meet the rule: their cap
/// is `min(max parallelism, upper limit)`, which bounds the target already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PartitionCap {
    /// A target above the alignment cap `min(N, max parallelism, upper limit)` ends at or below it
    /// (default).
    #[default]
    Enforced,
    /// The reference 1.16: the built-in modes keep an unaligned target, the legacy modes keep the
    /// current parallelism when their candidate inverts the scaling direction
    /// (`job.autoscaler.compat.reference-1-16: true`).
    Reference116,
}

impl PartitionCap {
    /// The rule of [`AutoScalerOptions::compat_reference_1_16`]: [`PartitionCap::Reference116`]
    /// when it is true, else [`PartitionCap::Enforced`].
    pub fn from_compat(compat_reference_1_16: bool) -> Self {
        if compat_reference_1_16 {
            Self::Reference116
        } else {
            Self::Enforced
        }
    }
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
        self.reported(candidate)
    }

    /// `candidate` as the result, reported when it is not the target.
    fn reported(&self, candidate: i64) -> AlignmentResult {
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

/// Aligns `ctx.target` under `mode` (anchor §2.5) with the partition cap enforced
/// ([`align_with`] and [`PartitionCap::Enforced`]). Built-in modes never block and never report;
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
    align_with(mode, ctx, PartitionCap::Enforced)
}

/// Aligns `ctx.target` under `mode` with the partition-cap rule `cap` (the one home of that rule,
/// see [`PartitionCap`]).
///
/// ```
/// use autoscaler_core::scaling::{AlignmentContext, AlignmentResult, PartitionCap, align_with};
/// use autoscaler_core::config::AlignmentMode;
/// // 15 partitions, current 100, max parallelism 180, computed target 180 (FLINK-40389's table).
/// let ctx = AlignmentContext { current: 100, target: 180, num_source_partitions: 15, max_parallelism: 180,
///     lower_limit: 1, upper_limit: 200, has_hash_input: false };
/// assert_eq!(align_with(AlignmentMode::Balanced, &ctx, PartitionCap::Enforced).parallelism, 15);
/// assert_eq!(align_with(AlignmentMode::Balanced, &ctx, PartitionCap::Reference116).parallelism, 180);
/// assert_eq!(
///     align_with(AlignmentMode::LegacyEvenlySpread, &ctx, PartitionCap::Enforced),
///     AlignmentResult { parallelism: 15, limited: Some((180, 15)) }
/// );
/// assert_eq!(
///     align_with(AlignmentMode::LegacyEvenlySpread, &ctx, PartitionCap::Reference116),
///     AlignmentResult { parallelism: 100, limited: Some((180, 100)) }
/// );
/// ```
pub fn align_with(mode: AlignmentMode, ctx: &AlignmentContext, cap: PartitionCap) -> AlignmentResult {
    let keep = |parallelism| AlignmentResult {
        parallelism,
        limited: None,
    };
    if !ctx.is_applicable() {
        return keep(ctx.target);
    }
    let cap_enforced = cap == PartitionCap::Enforced;
    let above_cap = ctx.target > ctx.upper_bound_for_alignment();
    // Nothing aligned in the region: the target, bounded by the cap (FLINK-40389; 1.16 kept the
    // target, so a source could end above its partition count).
    let or_capped_target = |aligned: i64| match aligned {
        aligned if aligned > 0 => aligned,
        _ if cap_enforced => ctx.target.min(ctx.upper_bound_for_alignment()),
        _ => ctx.target,
    };
    match mode {
        AlignmentMode::Off => keep(ctx.target),
        AlignmentMode::Balanced => keep(or_capped_target(ctx.first_aligned_in_region(true))),
        AlignmentMode::EvenlySpread => keep(or_capped_target(ctx.first_aligned_in_region(false))),
        AlignmentMode::LegacyEvenlySpread | AlignmentMode::LegacyMaximizeUtilisation => {
            let maximize = mode == AlignmentMode::LegacyMaximizeUtilisation;
            let aligned = ctx.first_aligned_in_region(maximize);
            if aligned > 0 {
                return keep(aligned);
            }
            let candidate = ctx.relaxed_downward_fallback();
            if cap_enforced && above_cap {
                // Above the cap the relaxed candidate is the answer even when it reverses the
                // direction (FLINK-40389); 1.16's direction check kept the current parallelism.
                ctx.reported(candidate)
            } else {
                ctx.blocking_fallback(candidate)
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

    /// FLINK-40389's table: 15 partitions, current 100, max parallelism 180, upper limit
    /// max(100, 200) = 200, lower limit 1, so the alignment cap is min(15, 180, 200) = 15.
    #[test]
    fn the_partition_cap_on_the_table_of_flink_40389() {
        let limited = |parallelism, expected: i64| AlignmentResult {
            parallelism,
            limited: Some((expected, parallelism)),
        };
        let plain = |parallelism| AlignmentResult {
            parallelism,
            limited: None,
        };
        let legacy = [
            AlignmentMode::LegacyEvenlySpread,
            AlignmentMode::LegacyMaximizeUtilisation,
        ];
        let built_in = [AlignmentMode::Balanced, AlignmentMode::EvenlySpread];
        let at = |target| source(100, target, 15, 180, 200);

        // Raw 180 (scale-up): region [180, 15] is empty.
        for mode in built_in {
            // 1.16 keeps 180: 165 subtasks without a split. The cap: min(180, 15) = 15.
            assert_eq!(
                align_with(mode, &at(180), PartitionCap::Enforced),
                plain(15),
                "{mode:?}"
            );
            assert_eq!(
                align_with(mode, &at(180), PartitionCap::Reference116),
                plain(180),
                "{mode:?}"
            );
        }
        for mode in legacy {
            // Relaxed candidate: share 15 / 180 = 0, walk down to p = 15 / (0 + 1) = 15 (a divisor).
            // 1.16: 15 <= current 100 inverts the scale-up, so it keeps 100 and reports (180, 100).
            assert_eq!(
                align_with(mode, &at(180), PartitionCap::Enforced),
                limited(15, 180),
                "{mode:?}"
            );
            assert_eq!(
                align_with(mode, &at(180), PartitionCap::Reference116),
                AlignmentResult {
                    parallelism: 100,
                    limited: Some((180, 100)),
                },
                "{mode:?}"
            );
        }

        // Raw 50 (scale-down): region [50, min(100, 15)] is empty.
        for mode in built_in {
            assert_eq!(align_with(mode, &at(50), PartitionCap::Enforced), plain(15), "{mode:?}");
            assert_eq!(
                align_with(mode, &at(50), PartitionCap::Reference116),
                plain(50),
                "{mode:?}"
            );
        }
        for mode in legacy {
            // Relaxed candidate 15 (share 15 / 50 = 0); 15 < 100 keeps the direction, so 1.16 agrees.
            for cap in [PartitionCap::Enforced, PartitionCap::Reference116] {
                assert_eq!(align_with(mode, &at(50), cap), limited(15, 50), "{mode:?} {cap:?}");
            }
        }

        // Raw 10 (scale-down), below the cap: region [10, 15]. 15 divides 15; BALANCED's first
        // load-reducing value 15 / (15 / 10) + 1 = 16 lies past the region. Both rules agree.
        for mode in built_in.into_iter().chain(legacy) {
            for cap in [PartitionCap::Enforced, PartitionCap::Reference116] {
                assert_eq!(align_with(mode, &at(10), cap), plain(15), "{mode:?} {cap:?}");
            }
        }

        // OFF keeps every target, with or without the cap.
        for target in [180, 50, 10] {
            for cap in [PartitionCap::Enforced, PartitionCap::Reference116] {
                assert_eq!(align_with(AlignmentMode::Off, &at(target), cap), plain(target));
            }
        }
        // `align` is the capped rule.
        assert_eq!(align(AlignmentMode::Balanced, &at(180)), plain(15));
    }

    #[test]
    fn the_cap_can_lift_a_scale_up_to_the_partition_count() {
        // 15 partitions at current 10, computed 30: 1.16 gives 30 (15 idle subtasks), the cap 15.
        let ctx = source(10, 30, 15, 128, 200);
        assert_eq!(
            align_with(AlignmentMode::Balanced, &ctx, PartitionCap::Enforced).parallelism,
            15
        );
        assert_eq!(
            align_with(AlignmentMode::Balanced, &ctx, PartitionCap::Reference116).parallelism,
            30
        );
        // Legacy: the relaxed candidate 15 / (0 + 1) = 15 keeps the scale-up, so both rules give 15
        // with the report (30, 15).
        for cap in [PartitionCap::Enforced, PartitionCap::Reference116] {
            assert_eq!(
                align_with(AlignmentMode::LegacyEvenlySpread, &ctx, cap),
                AlignmentResult {
                    parallelism: 15,
                    limited: Some((30, 15))
                }
            );
        }
    }

    #[test]
    fn the_legacy_cap_respects_the_lower_limit() {
        // 12 partitions, current 40, computed 30 (scale-down), lower limit 2: cap 12, region empty.
        // Relaxed: share 12 / 30 = 0, p = 12 / 1 = 12, a divisor; max(12, 2) = 12.
        let ctx = AlignmentContext {
            lower_limit: 2,
            ..source(40, 30, 12, 128, 200)
        };
        assert_eq!(
            align_with(AlignmentMode::LegacyEvenlySpread, &ctx, PartitionCap::Enforced),
            AlignmentResult {
                parallelism: 12,
                limited: Some((30, 12))
            }
        );
        // 7 partitions, current 20, computed 9, lower limit 8 (vertex.min-parallelism): the relaxed
        // candidate 7 is lifted to 8 by the lower limit, still one above the partitions: the user's
        // floor wins over the cap, as in 1.16.
        let ctx = AlignmentContext {
            lower_limit: 8,
            ..source(20, 9, 7, 128, 200)
        };
        assert_eq!(
            align_with(AlignmentMode::LegacyEvenlySpread, &ctx, PartitionCap::Enforced).parallelism,
            8
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
                // No divisor in the region: the target, bounded by the alignment cap (FLINK-40389);
                // the reference 1.16 keeps the target.
                prop_assert_eq!(result.parallelism, target.min(ctx.upper_bound_for_alignment()));
                prop_assert_eq!(align_with(AlignmentMode::EvenlySpread, &ctx, PartitionCap::Reference116).parallelism, target);
            }
        }

        /// The partition cap: a source's aligned parallelism never exceeds its partition count, in
        /// every mode but OFF, unless the lower limit (`min(current, vertex.min-parallelism)`)
        /// itself lies above the partitions.
        #[test]
        fn with_the_cap_no_source_ends_above_its_partitions(
            partitions in 1i64..400,
            current in 1i64..600,
            target in 1i64..700,
            max_parallelism in 1i64..1000,
            min_parallelism in 1i64..40,
            vertex_max_parallelism in 1i64..800,
            hash in any::<bool>(),
        ) {
            prop_assume!(current != target);
            // min(current, vertex.min-parallelism) for a min-parallelism of at most the partitions.
            let lower_limit = current.min(min_parallelism).min(partitions);
            let ctx = AlignmentContext {
                current, target, num_source_partitions: partitions, max_parallelism,
                lower_limit, upper_limit: current.max(vertex_max_parallelism), has_hash_input: hash,
            };
            for mode in [
                AlignmentMode::Balanced,
                AlignmentMode::EvenlySpread,
                AlignmentMode::LegacyEvenlySpread,
                AlignmentMode::LegacyMaximizeUtilisation,
            ] {
                let result = align_with(mode, &ctx, PartitionCap::Enforced);
                prop_assert!(result.parallelism <= partitions, "{:?}: {:?} for {:?}", mode, result, ctx);
                // A report always names the target and the result.
                if let Some((expected, actual)) = result.limited {
                    prop_assert_eq!((expected, actual), (target, result.parallelism));
                }
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
            // Above the alignment cap the cap wins over the direction (FLINK-40389): a source asked
            // for more subtasks than it has partitions gets its partition count, even below current.
            let caps = [PartitionCap::Reference116, PartitionCap::Enforced];
            for (mode, cap) in [AlignmentMode::Balanced, AlignmentMode::EvenlySpread].into_iter().flat_map(|m| caps.map(|c| (m, c))) {
                let p = align_with(mode, &ctx, cap).parallelism;
                if cap == PartitionCap::Enforced && ctx.is_applicable() && target > ctx.upper_bound_for_alignment() {
                    prop_assert_eq!(p, ctx.upper_bound_for_alignment());
                } else if target > current {
                    prop_assert!(p > current);
                } else {
                    prop_assert!(p <= current && p >= target);
                }
            }
        }
    }
}
