//! Compiles `proto/leafid/v1/leafid.proto` (the gRPC door, `src/grpc`) at build time: protox
//! parses it in pure Rust (no `protoc` on the machine), tonic-prost-build writes the messages
//! and the server and client traits into `OUT_DIR`, and the file descriptor set is kept for
//! server reflection.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/leafid/v1/leafid.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("leafid_v1_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
