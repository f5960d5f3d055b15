// launch <<<1, 256, 0>>>
extern "C" __global__ void __launch_bounds__(256) bias_grad(const float* DLC_RESTRICT p0, const unsigned char* DLC_RESTRICT p1, float* DLC_RESTRICT p2) {
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < 32LL; o += (long long)gridDim.x * blockDim.x) {
    double acc = 0;
    for (long long k = 0; k < 9216LL; k++) {
      const long long i = o * 144LL + (k / 144LL) * 4608LL + ((k / 12LL) % 12LL) * 12LL + (k % 12LL);
      const float r0 = p0[i];
      const float r1 = (float)(p1[i]);
      const float r2 = 0.0f;
      const float r3 = (r1 != 0.0f) ? r0 : r2;
      acc += r3;
    }
    p2[o] = (float)acc;
  }
}
