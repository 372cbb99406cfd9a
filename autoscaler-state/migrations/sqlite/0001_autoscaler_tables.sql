-- flink-autoscaler-rs schema v1 for SQLite. Same logical shape as the reference's
-- t_flink_autoscaler_state_store / t_flink_autoscaler_event_handler, plus create_time on states.
CREATE TABLE IF NOT EXISTS t_flink_autoscaler_state_store
(
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    create_time TEXT    NOT NULL,
    update_time TEXT    NOT NULL,
    job_key     TEXT    NOT NULL,
    state_type  TEXT    NOT NULL,
    state_value TEXT    NOT NULL,
    CONSTRAINT un_job_state_type_inx UNIQUE (job_key, state_type)
);

CREATE TABLE IF NOT EXISTS t_flink_autoscaler_event_handler
(
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    create_time TEXT    NOT NULL,
    update_time TEXT    NOT NULL,
    job_key     TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    event_type  TEXT    NOT NULL,
    message     TEXT    NOT NULL,
    event_count INTEGER NOT NULL,
    event_key   TEXT    NOT NULL
);

CREATE INDEX IF NOT EXISTS job_key_reason_event_key_idx ON t_flink_autoscaler_event_handler (job_key, reason, event_key);
CREATE INDEX IF NOT EXISTS job_key_reason_create_time_idx ON t_flink_autoscaler_event_handler (job_key, reason, create_time);
