-- flink-autoscaler-rs schema v2 for MySQL / MariaDB: the replicas sharing the database and one
-- lease per job (see the crate docs, "Several replicas"). Times are milliseconds since the Unix
-- epoch on the database's clock. job_key is VARBINARY(764), as in the state table.
CREATE TABLE IF NOT EXISTS t_flink_autoscaler_replica
(
    replica_id   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    heartbeat_at BIGINT       NOT NULL,
    PRIMARY KEY (replica_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci;

CREATE TABLE IF NOT EXISTS t_flink_autoscaler_job_lease
(
    job_key    VARBINARY(764) NOT NULL,
    owner      VARCHAR(255)   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    epoch      BIGINT         NOT NULL,
    expires_at BIGINT         NOT NULL,
    PRIMARY KEY (job_key),
    INDEX job_lease_owner_idx (owner)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci;
