//! In-process engine tests that need no database: snowflake generators and the ring buffer
//! under several threads.

mod cached;
mod clock_back;
mod direct;
mod ring;
