// launch <<<4, 256, 0>>>
extern "C" __global__ void __launch_bounds__(256) scale_shift(const float* DLC_RESTRICT p0, const float* DLC_RESTRICT p1, const float* DLC_RESTRICT p2, float* DLC_RESTRICT p3) {
  for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < 1024LL; q += (long long)gridDim.x * blockDim.x) {
    const float4 v0 = reinterpret_cast<const float4*>(p0)[q];
    const float4 v1 = reinterpret_cast<const float4*>(p1)[q];
    float4 w0;
    {
      const long long i = q * 4LL + 0LL;
      const float r0 = v0.x;
      const float r1 = v1.x;
      const float r2 = r0 * r1;
      const float r3 = p2[0];
      const float r4 = r2 + r3;
      w0.x = r4;
    }
    {
      const long long i = q * 4LL + 1LL;
      const float r0 = v0.y;
      const float r1 = v1.y;
      const float r2 = r0 * r1;
      const float r3 = p2[0];
      const float r4 = r2 + r3;
      w0.y = r4;
    }
    {
      const long long i = q * 4LL + 2LL;
      const float r0 = v0.z;
      const float r1 = v1.z;
      const float r2 = r0 * r1;
      const float r3 = p2[0];
      const float r4 = r2 + r3;
      w0.z = r4;
    }
    {
      const long long i = q * 4LL + 3LL;
      const float r0 = v0.w;
      const float r1 = v1.w;
      const float r2 = r0 * r1;
      const float r3 = p2[0];
      const float r4 = r2 + r3;
      w0.w = r4;
    }
    reinterpret_cast<float4*>(p3)[q] = w0;
  }
}
