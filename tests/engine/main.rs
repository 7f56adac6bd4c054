//! In-process engine tests that need no database: snowflake generators and the ring buffer
//! under several threads, and the spread of snowflake ids over `id % 2^k`.

mod cached;
mod clock_back;
mod direct;
mod ring;
mod spread;
