//! [`RescaleApiScalingRealizer`]: applies parallelism overrides in place through the adaptive
//! scheduler's resource-requirements API (reference: standalone `RescaleApiScalingRealizer`).

use crate::context::FlinkRestContext;
use crate::options::uses_adaptive_scheduler;
use crate::rest::{JobResourceRequirements, ParallelismBounds, RestError, VertexResourceRequirements};
use async_trait::async_trait;
use autoscaler_core::{
    AutoScalerEventHandler, ConfigChanges, EventType, JobAutoScalerContext, JobStatus, ParallelismOverrides,
    RealizeError, ScalingRealizer,
};
use std::sync::Arc;

/// Reason of the Normal event emitted when a rescale request was sent.
pub const SCALING_EVENT_REASON: &str = "Scaling";

/// Rescales a RUNNING job in place: `GET /jobs/<id>/resource-requirements`, set
/// `{lowerBound: 1, upperBound: p}` for every vertex with an override, and `PUT` the full map (every
/// vertex, unchanged ones copied through) only when something changed. Flink accepts the PUT at once
/// and rescales later; the job stays RUNNING throughout.
///
/// It does nothing (a warning is logged) unless the job's configuration sets `jobmanager.scheduler:
/// adaptive` and the job is RUNNING. Overrides for vertices Flink does not list are ignored.
/// A request Flink refuses (400: a bound above the max parallelism, an unknown vertex) is a
/// [`RealizeError::Refused`] carrying Flink's reason, which the caller reports as a Warning event.
///
/// ```
/// use autoscaler_core::{BasicJobContext, LoggingEventHandler};
/// use autoscaler_realizer::rest::FlinkRestClient;
/// use autoscaler_realizer::RescaleApiScalingRealizer;
/// use std::sync::Arc;
///
/// type Ctx = BasicJobContext<String, FlinkRestClient>;
/// let quiet: RescaleApiScalingRealizer<String, Ctx> = RescaleApiScalingRealizer::new();
/// let with_events = RescaleApiScalingRealizer::<String, Ctx>::with_event_handler(Arc::new(LoggingEventHandler::default()));
/// # let _ = (quiet, with_events);
/// ```
pub struct RescaleApiScalingRealizer<K, Ctx> {
    event_handler: Option<Arc<dyn AutoScalerEventHandler<K, Ctx>>>,
}

impl<K, Ctx> Default for RescaleApiScalingRealizer<K, Ctx> {
    fn default() -> Self {
        Self { event_handler: None }
    }
}

impl<K, Ctx> RescaleApiScalingRealizer<K, Ctx> {
    /// A realizer that emits no event.
    pub fn new() -> Self {
        Self::default()
    }

    /// A realizer that emits the reference's `Scaling` Normal event to `handler` for every PUT.
    pub fn with_event_handler(handler: Arc<dyn AutoScalerEventHandler<K, Ctx>>) -> Self {
        Self {
            event_handler: Some(handler),
        }
    }
}

/// The requirements with every overridden vertex set to `{1, p}`, or `None` when they already match.
/// Vertices Flink does not list are ignored, as the reference does.
pub fn updated_requirements(
    current: &JobResourceRequirements,
    overrides: &ParallelismOverrides,
) -> Option<JobResourceRequirements> {
    let mut updated = current.clone();
    let mut changed = false;
    for (vertex, requirements) in &mut updated.0 {
        let Some(&p) = overrides.get(vertex.as_str()) else {
            continue;
        };
        let wanted = ParallelismBounds {
            lower_bound: 1,
            upper_bound: p,
        };
        if requirements.parallelism != wanted {
            *requirements = VertexResourceRequirements { parallelism: wanted };
            changed = true;
        }
    }
    changed.then_some(updated)
}

fn unavailable(job_id: &str, error: &RestError) -> RealizeError {
    if error.is_job_not_found() {
        RealizeError::Unavailable(format!("job {job_id} is not running on the cluster anymore ({error})"))
    } else {
        RealizeError::Unavailable(error.to_string())
    }
}

#[async_trait]
impl<K, Ctx> ScalingRealizer<K, Ctx> for RescaleApiScalingRealizer<K, Ctx>
where
    K: Send + Sync,
    Ctx: JobAutoScalerContext<K> + FlinkRestContext,
{
    async fn realize_parallelism_overrides(
        &self,
        ctx: &Ctx,
        overrides: &ParallelismOverrides,
    ) -> Result<(), RealizeError> {
        if !uses_adaptive_scheduler(ctx.configuration()) {
            tracing::warn!("In-place rescaling is only available with the adaptive scheduler.");
            return Ok(());
        }
        if ctx.job_status() != Some(JobStatus::Running) {
            tracing::warn!("Job in terminal or reconciling state cannot be scaled in-place.");
            return Ok(());
        }
        let Some(job_id) = ctx.job_id() else {
            tracing::warn!("Job has no Flink job id yet; it cannot be scaled in-place.");
            return Ok(());
        };
        let client = ctx.rest_client();
        let current = client
            .resource_requirements(job_id)
            .await
            .map_err(|e| unavailable(job_id, &e))?;
        let Some(updated) = updated_requirements(&current, overrides) else {
            tracing::info!("Vertex resources requirements already match target, nothing to do...");
            return Ok(());
        };
        match client.put_resource_requirements(job_id, &updated).await {
            Ok(()) => {}
            Err(RestError::Status {
                status: 400, message, ..
            }) => return Err(RealizeError::Refused(message)),
            Err(e) => return Err(unavailable(job_id, &e)),
        }
        if let Some(handler) = &self.event_handler {
            let message = format!("In-place scaling triggered, the new requirements is {updated}.");
            handler
                .handle_event(ctx, EventType::Normal, SCALING_EVENT_REASON, &message, None, None)
                .await;
        }
        Ok(())
    }

    async fn realize_config_overrides(&self, _ctx: &Ctx, changes: &ConfigChanges) -> Result<(), RealizeError> {
        if !changes.overrides.is_empty() || !changes.removals.is_empty() {
            tracing::warn!(
                ?changes,
                "RescaleApiScalingRealizer does not support updating the TaskManager configuration"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_metrics::VertexId;

    fn requirements(entries: &[(&str, u32, u32)]) -> JobResourceRequirements {
        JobResourceRequirements(
            entries
                .iter()
                .map(|(v, lower, upper)| {
                    (
                        (*v).to_owned(),
                        VertexResourceRequirements {
                            parallelism: ParallelismBounds {
                                lower_bound: *lower,
                                upper_bound: *upper,
                            },
                        },
                    )
                })
                .collect(),
        )
    }

    fn overrides(entries: &[(&str, u32)]) -> ParallelismOverrides {
        entries.iter().map(|(v, p)| (VertexId::new(v), *p)).collect()
    }

    #[test]
    fn only_changed_bounds_produce_an_update_listing_every_vertex() {
        let current = requirements(&[("a", 1, 1), ("b", 1, 2)]);
        assert_eq!(updated_requirements(&current, &overrides(&[("a", 1), ("b", 2)])), None);
        assert_eq!(
            updated_requirements(&current, &overrides(&[("b", 4)])),
            Some(requirements(&[("a", 1, 1), ("b", 1, 4)]))
        );
        // A lower bound other than 1 is normalised even at the same upper bound.
        let pinned = requirements(&[("a", 2, 2)]);
        assert_eq!(
            updated_requirements(&pinned, &overrides(&[("a", 2)])),
            Some(requirements(&[("a", 1, 2)]))
        );
    }

    #[test]
    fn overrides_for_unknown_vertices_are_ignored() {
        let current = requirements(&[("a", 1, 1)]);
        assert_eq!(updated_requirements(&current, &overrides(&[("zzz", 3)])), None);
    }
}
