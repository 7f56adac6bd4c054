-- The clock-back value (snowflake.clock_back_bits) the holder of a leased worker id issues
-- under: 0 until its clock steps back beyond clock.max_backward_ms. For operators to see; a
-- new holder never needs it: it resumes after last_timestamp_ms, which covers every tick the
-- previous holders issued under any value (docs/guarantees.md, "Clock-back bits").
ALTER TABLE leafid_worker_lease ADD COLUMN clock_back INT NOT NULL DEFAULT 0;
