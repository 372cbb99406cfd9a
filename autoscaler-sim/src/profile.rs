//! How fast records arrive at a source: [`RateProfile`].

use std::f64::consts::PI;

/// The arrival rate of a source (records/s) as a function of simulated time (seconds since start).
#[derive(Debug, Clone, PartialEq)]
pub enum RateProfile {
    /// Always `rate`.
    Constant {
        /// Records per second.
        rate: f64,
    },
    /// `before` until `at_secs`, then `after` (a load step up or down).
    Step {
        /// Rate before the step.
        before: f64,
        /// Rate from the step on.
        after: f64,
        /// When the step happens.
        at_secs: f64,
    },
    /// Several steps: `(from_secs, rate)` pairs, sorted by time; the first applies from 0.
    Steps {
        /// `(from_secs, rate)` pairs.
        steps: Vec<(f64, f64)>,
    },
    /// `from` until `start_secs`, linearly to `to` at `end_secs`, then `to`.
    Ramp {
        /// Rate before the ramp.
        from: f64,
        /// Rate after the ramp.
        to: f64,
        /// Ramp start.
        start_secs: f64,
        /// Ramp end.
        end_secs: f64,
    },
    /// A day-shaped sine: `mean + amplitude * sin(2π t / period)`, starting at the mean and rising.
    Diurnal {
        /// Mean rate.
        mean: f64,
        /// Half the peak-to-trough difference.
        amplitude: f64,
        /// Length of one "day".
        period_secs: f64,
    },
    /// `base`, except `peak` during `[at_secs, at_secs + duration_secs)`.
    Spike {
        /// Normal rate.
        base: f64,
        /// Rate during the spike.
        peak: f64,
        /// Spike start.
        at_secs: f64,
        /// Spike length.
        duration_secs: f64,
    },
}

impl RateProfile {
    /// The rate at `t` seconds, never negative.
    pub fn rate_at(&self, t: f64) -> f64 {
        let r = match self {
            Self::Constant { rate } => *rate,
            Self::Step { before, after, at_secs } => {
                if t < *at_secs {
                    *before
                } else {
                    *after
                }
            }
            Self::Steps { steps } => steps
                .iter()
                .take_while(|(from, _)| *from <= t)
                .last()
                .or(steps.first())
                .map_or(0.0, |(_, r)| *r),
            Self::Ramp {
                from,
                to,
                start_secs,
                end_secs,
            } => {
                if t <= *start_secs {
                    *from
                } else if t >= *end_secs || end_secs <= start_secs {
                    *to
                } else {
                    from + (to - from) * (t - start_secs) / (end_secs - start_secs)
                }
            }
            Self::Diurnal {
                mean,
                amplitude,
                period_secs,
            } => {
                if *period_secs > 0.0 {
                    mean + amplitude * (2.0 * PI * t / period_secs).sin()
                } else {
                    *mean
                }
            }
            Self::Spike {
                base,
                peak,
                at_secs,
                duration_secs,
            } => {
                if t >= *at_secs && t < at_secs + duration_secs {
                    *peak
                } else {
                    *base
                }
            }
        };
        r.max(0.0)
    }

    /// The instants (seconds) at which the rate changes abruptly: where a new "load phase" starts.
    /// Smooth profiles (ramp end, diurnal) report their quarter periods so convergence can be
    /// measured piecewise.
    pub fn change_points(&self, horizon_secs: f64) -> Vec<f64> {
        match self {
            Self::Constant { .. } => Vec::new(),
            Self::Step { at_secs, .. } => vec![*at_secs],
            Self::Steps { steps } => steps.iter().skip(1).map(|(t, _)| *t).collect(),
            Self::Ramp { start_secs, .. } => vec![*start_secs],
            Self::Diurnal { period_secs, .. } => {
                let quarter = period_secs / 4.0;
                let mut points = Vec::new();
                let mut t = quarter;
                while quarter > 0.0 && t < horizon_secs {
                    points.push(t);
                    t += quarter;
                }
                points
            }
            Self::Spike {
                at_secs, duration_secs, ..
            } => vec![*at_secs, at_secs + duration_secs],
        }
        .into_iter()
        .filter(|t| *t > 0.0 && *t < horizon_secs)
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_give_hand_computed_rates() {
        let step = RateProfile::Step {
            before: 100.0,
            after: 500.0,
            at_secs: 60.0,
        };
        assert_eq!(step.rate_at(59.9), 100.0);
        assert_eq!(step.rate_at(60.0), 500.0);
        let ramp = RateProfile::Ramp {
            from: 100.0,
            to: 300.0,
            start_secs: 10.0,
            end_secs: 20.0,
        };
        assert_eq!(ramp.rate_at(15.0), 200.0);
        assert_eq!(ramp.rate_at(25.0), 300.0);
        let day = RateProfile::Diurnal {
            mean: 1000.0,
            amplitude: 500.0,
            period_secs: 400.0,
        };
        assert!((day.rate_at(100.0) - 1500.0).abs() < 1e-9);
        assert!((day.rate_at(300.0) - 500.0).abs() < 1e-9);
        let spike = RateProfile::Spike {
            base: 10.0,
            peak: 90.0,
            at_secs: 5.0,
            duration_secs: 2.0,
        };
        assert_eq!(
            (spike.rate_at(4.0), spike.rate_at(6.0), spike.rate_at(7.0)),
            (10.0, 90.0, 10.0)
        );
        let steps = RateProfile::Steps {
            steps: vec![(0.0, 1.0), (10.0, 2.0), (20.0, 3.0)],
        };
        assert_eq!(
            (steps.rate_at(5.0), steps.rate_at(10.0), steps.rate_at(99.0)),
            (1.0, 2.0, 3.0)
        );
        assert_eq!(steps.change_points(100.0), vec![10.0, 20.0]);
    }
}
