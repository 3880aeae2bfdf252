fn main() {
    println!("gpuaudit");
}
