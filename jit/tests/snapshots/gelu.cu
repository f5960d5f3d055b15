// launch <<<65535, 256, 0>>>
extern "C" __global__ void __launch_bounds__(256) gelu(const float* DLC_RESTRICT p0, float* DLC_RESTRICT p1) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < 16777216LL; i += (long long)gridDim.x * blockDim.x) {
    const float r0 = p0[i];
    const float r1 = 0.5f;
    const float r2 = r0 * r1;
    const float r3 = 1.4142135f;
    const float r4 = r0 / r3;
    const float r5 = dlc_erf(r4);
    const float r6 = 1.0f;
    const float r7 = r6 + r5;
    const float r8 = r2 * r7;
    p1[i] = r8;
  }
}
