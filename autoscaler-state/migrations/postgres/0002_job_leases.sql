-- flink-autoscaler-rs schema v2 for PostgreSQL: the replicas sharing the database and one lease
-- per job (see the crate docs, "Several replicas"). Times are milliseconds since the Unix epoch
-- on the database's clock.
CREATE TABLE IF NOT EXISTS t_flink_autoscaler_replica
(
    replica_id   VARCHAR(255) NOT NULL PRIMARY KEY,
    heartbeat_at BIGINT       NOT NULL
);

CREATE TABLE IF NOT EXISTS t_flink_autoscaler_job_lease
(
    job_key    TEXT         NOT NULL PRIMARY KEY,
    owner      VARCHAR(255),
    epoch      BIGINT       NOT NULL,
    expires_at BIGINT       NOT NULL
);

CREATE INDEX IF NOT EXISTS job_lease_owner_idx ON t_flink_autoscaler_job_lease (owner);
