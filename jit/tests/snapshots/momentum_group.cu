// launch <<<1570, 256, 0>>>
extern "C" __global__ void __launch_bounds__(256) momentum(const dlc_bf16* DLC_RESTRICT p0, const float* DLC_RESTRICT p1, const float* DLC_RESTRICT p2, const float* DLC_RESTRICT p3, dlc_bf16* DLC_RESTRICT p4, float* DLC_RESTRICT p5, const dlc_bf16* DLC_RESTRICT p6, const float* DLC_RESTRICT p7, const float* DLC_RESTRICT p8, const float* DLC_RESTRICT p9, dlc_bf16* DLC_RESTRICT p10, float* DLC_RESTRICT p11) {
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < 401920LL; t += (long long)gridDim.x * blockDim.x) {
    if (t < 401408LL) {
      const long long i = t - 0LL;
      const float r0 = dlc_from_bf16(p0[i]);
      const float r1 = p1[i];
      const float r2 = p2[i];
      const float r3 = 0.9f;
      const float r4 = r3 * r2;
      const float r5 = r4 + r1;
      const float r6 = p3[0];
      const float r7 = r6 * r5;
      const float r8 = r0 - r7;
      const float r9 = dlc_from_bf16(dlc_to_bf16(r8));
      p4[i] = dlc_to_bf16(r9);
      p5[i] = r5;
    }
    else if (t < 401920LL) {
      const long long i = t - 401408LL;
      const float r0 = dlc_from_bf16(p6[i]);
      const float r1 = p7[i];
      const float r2 = p8[i];
      const float r3 = 0.9f;
      const float r4 = r3 * r2;
      const float r5 = r4 + r1;
      const float r6 = p9[0];
      const float r7 = r6 * r5;
      const float r8 = r0 - r7;
      const float r9 = dlc_from_bf16(dlc_to_bf16(r8));
      p10[i] = dlc_to_bf16(r9);
      p11[i] = r5;
    }
  }
}
