-- flink-autoscaler-rs schema v1 for MySQL / MariaDB. Same logical shape as the reference's
-- t_flink_autoscaler_state_store / t_flink_autoscaler_event_handler, plus create_time on states.
-- job_key is VARBINARY(764) (the reference: varchar(191) utf8mb4_general_ci), so keys differing
-- only in case, accents or trailing spaces stay distinct rows (other text columns keep the
-- reference's utf8mb4_general_ci). Times are DATETIME(6), in UTC.
CREATE TABLE IF NOT EXISTS t_flink_autoscaler_state_store
(
    id          BIGINT         NOT NULL AUTO_INCREMENT,
    create_time DATETIME(6)    NOT NULL,
    update_time DATETIME(6)    NOT NULL,
    job_key     VARBINARY(764) NOT NULL,
    state_type  VARCHAR(100)   CHARACTER SET ascii NOT NULL,
    state_value LONGTEXT       NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY un_job_state_type_inx (job_key, state_type)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci;

CREATE TABLE IF NOT EXISTS t_flink_autoscaler_event_handler
(
    id          BIGINT         NOT NULL AUTO_INCREMENT,
    create_time DATETIME(6)    NOT NULL,
    update_time DATETIME(6)    NOT NULL,
    job_key     VARBINARY(764) NOT NULL,
    reason      VARCHAR(191)   NOT NULL,
    event_type  VARCHAR(100)   NOT NULL,
    message     LONGTEXT       NOT NULL,
    event_count INT            NOT NULL,
    event_key   VARCHAR(100)   NOT NULL,
    PRIMARY KEY (id),
    INDEX job_key_reason_event_key_idx (job_key, reason, event_key),
    INDEX job_key_reason_create_time_idx (job_key, reason, create_time)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci;
