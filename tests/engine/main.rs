//! In-process engine tests that need no database: snowflake generators and the ring buffer
//! under several threads.

mod cached;
mod direct;
mod ring;
