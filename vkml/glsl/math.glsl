// math.glsl: float32 elementary functions with known accuracy, so that results do not depend on a
// driver's built-ins (the Vulkan spec lets exp/log/pow be off by 3 + 2|x| ULP and sin/cos by 2^-11
// absolute). The one built-in used is exp2 on a reduced argument, |t| <= 1/2, where that bound is 4 ULP.
// Each one: exact special cases first, then argument reduction, then a polynomial fitted
// by least squares (weighted towards minimax) on the reduced interval in float64; the fit and the
// measured errors are in nbs/13_kernels.ipynb. GLSL has no erf at all.
// `precise` marks the compensated steps (Cody-Waite reductions, exact products): without it a driver
// may fuse or reorder them (llvmpipe did: exp lost 4e-6 relative at |x| = 72).
#ifndef VKML_MATH_GLSL
#define VKML_MATH_GLSL

// 2^k * y for |k| up to ~300, in two steps so that results in the subnormal range are right too.
float scale2(float y, int k) {
    if (k >= -126 && k <= 127) return y * uintBitsToFloat(uint(k + 127) << 23);   // one step (every finite exp but the extremes)
    int k1 = clamp(k, -126, 127);
    y *= uintBitsToFloat(uint(k1 + 127) << 23);
    k -= k1;
    return k == 0 ? y : y * uintBitsToFloat(uint(clamp(k, -126, 127) + 127) << 23);
}

// e^r = 1 + r + r^2 q(r) on |r| <= ln2/2
float exp_q(float r) {
    return 0.5 + r * (0.1666666567325592 + r * (0.04166629537940025 + r * (0.008333496749401093
           + r * (0.0013944651000201702 + r * 0.00019790371879935265))));
}
const float LN2_HI = 0.693115234375;          // 12 trailing zero bits: k * LN2_HI is exact
const float LN2_LO = 3.194618329871446e-05;

// e^x: x = k ln2 + r (Cody-Waite), e^r = 2^(r log2 e) by the built-in exp2, times 2^k. Within 4 ulp by the
// spec (lavapipe measured 3.3, mean 0.85); the polynomial it replaced was ~1 ulp but twice the arithmetic.
float vexp(float x) {
    if (isnan(x)) return x;
    if (x > 88.72283935546875) return F_INF;
    if (x < -103.97208) return 0.0;
    float k = roundEven(x * 1.4426950216293335);
    precise float r = (x - k * LN2_HI) - k * LN2_LO;   // precise: no fusing or reordering, or r loses the bits the split saves
    // e^r = 2^(r log2 e) by the built-in: on |r log2 e| <= 1/2 the Vulkan spec bounds it by 4 ulp, and it runs on
    // the GPU's special-function unit beside the arithmetic (the polynomial costs the arithmetic units 8 operations)
    return scale2(exp2(r * 1.4426950408889634), int(k));
}

// e^x - 1, accurate near 0 (ELU).
float vexpm1(float x) {
    if (x == 0.0) return x;                        // -0 stays -0
    if (abs(x) < 0.34657359) return x + x * x * exp_q(x);
    return vexp(x) - 1.0;
}

// log(x): x = 2^e m with m in [sqrt(1/2), sqrt(2)), log(1+f) = f - f^2/2 + f^3 q(f).
float vlog(float x) {
    if (isnan(x) || x < 0.0) return F_NAN;
    if (x == 0.0) return F_NINF;
    if (isinf(x)) return x;
    int e = 0;
    if (x < 1.17549435e-38) { x *= 8388608.0; e = -23; }   // subnormal: scale up first
    uint b = floatBitsToUint(x);
    e += int(b >> 23) - 127;
    float m = uintBitsToFloat((b & 0x007fffffu) | 0x3f800000u);   // [1, 2)
    if (m > 1.41421356) { m *= 0.5; e += 1; }
    float f = m - 1.0;
    float q = 0.3333333134651184 + f * (-0.250008225440979 + f * (0.20001226663589478 + f * (-0.16623353958129883
              + f * (0.14201776683330536 + f * (-0.13160233199596405 + f * (0.12761467695236206 + f * -0.07634225487709045))))));
    float fe = float(e);
    return (f * f * f * q + fe * LN2_LO) + (f - 0.5 * f * f) + fe * LN2_HI;
}

// log(1 + u) for u >= 0 (softplus): compensates the rounding of 1 + u.
float vlog1p(float u) {
    precise float w = 1.0 + u;
    if (w == 1.0) return u;
    precise float err = (w - 1.0) - u;   // the rounding error of 1 + u, exactly
    return vlog(w) - err / w;
}

// Payne-Hanek argument reduction, shared by float and double: x = m 2^e (m = m1 2^32 + m0, an integer of at
// most 53 bits) times 2/pi, exactly, in 32-bit integers, on the 256-bit window of 2/pi that matters: the
// words before it add whole multiples of 4 (turns), the words after it less than m 2^-223 of a quadrant.
// 2/pi = sum_k TWO_OVER_PI[k] 2^(-32(k+1)): 1280 bits, enough for the largest double.
const uint TWO_OVER_PI[40] = uint[40](
    0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u,
    0xfe5163abu, 0xdebbc561u, 0xb7246e3au, 0x424dd2e0u, 0x06492eeau, 0x09d1921cu,
    0xfe1deb1cu, 0xb129a73eu, 0xe88235f5u, 0x2ebb4484u, 0xe99c7026u, 0xb45f7e41u,
    0x3991d639u, 0x835339f4u, 0x9c845f8bu, 0xbdf9283bu, 0x1ff897ffu, 0xde05980fu,
    0xef2f118bu, 0x5a0a6d1fu, 0x6d367ecfu, 0x27cb09b7u, 0x4f463f66u, 0x9e5fea2du,
    0x7527bac7u, 0xebe5f17bu, 0x3d0739f7u, 0x8a5292eau, 0x6bfb5fb1u, 0x1f8d5d08u,
    0x56033046u, 0xfc7b6babu, 0xf0cfbc20u, 0x9af4361du);

// p += v 2^(32 i), the carry carried up (p: 11 words, least significant first).
void add_word(inout uint p[11], int i, uint v) {
    uint c;
    p[i] = uaddCarry(p[i], v, c);
    for (int j = i + 1; j < 11 && c != 0u; j++) p[j] = uaddCarry(p[j], c, c);
}
// The 32 bits of p from bit `pos` up.
uint bits_at(uint p[11], int pos) {
    int i = pos >> 5, s = pos & 31;
    return s == 0 ? p[i] : (p[i] >> s) | (p[i + 1] << (32 - s));
}
// The quadrant q (mod 4) of x 2/pi rounded to the nearest integer, and the rest f = x 2/pi - q in 128 bits
// (f.w most significant, |f| <= 1/2, `neg` its sign). Needs x >= 2^-30 (e >= -83).
int pio2_bits(uint m0, uint m1, int e, out uvec4 f, out bool neg) {
    int k0 = max(e - 2, 0) >> 5;                   // the first word whose terms are not multiples of 4
    uint p[11] = uint[11](0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u);
    for (int j = 0; j < 8; j++) {                  // p = m * (TWO_OVER_PI[k0] .. TWO_OVER_PI[k0 + 7])
        uint t = TWO_OVER_PI[k0 + j], hi, lo;
        umulExtended(m0, t, hi, lo); add_word(p, 7 - j, lo); add_word(p, 8 - j, hi);
        umulExtended(m1, t, hi, lo); add_word(p, 8 - j, lo); add_word(p, 9 - j, hi);
    }
    int s = 32 * (k0 + 8) - e;                     // p's fraction bits: p / 2^s = x 2/pi (mod 4)
    int q = int(bits_at(p, s) & 3u);
    f = uvec4(bits_at(p, s - 128), bits_at(p, s - 96), bits_at(p, s - 64), bits_at(p, s - 32));
    neg = (f.w >> 31) != 0u;
    if (neg) {                                     // f >= 1/2: the next quadrant, and 1 - f
        uint c;
        f.x = uaddCarry(~f.x, 1u, c); f.y = uaddCarry(~f.y, c, c); f.z = uaddCarry(~f.z, c, c); f.w = ~f.w + c;
        q += 1;
    }
    return q;
}
float reduce_pio2(float ax, out int q) {
    uint b = floatBitsToUint(ax);
    uvec4 f;
    bool neg;
    q = pio2_bits((b & 0x007fffffu) | 0x00800000u, 0u, int(b >> 23) - 150, f, neg);
    float v = (float(f.w) * 2.3283064365386963e-10 + float(f.z) * 5.421010862427522e-20) + float(f.y) * 1.2621774483536189e-29;
    v *= 1.5707963267948966;
    return neg ? -v : v;
}

// sin and cos: x = q pi/2 + r, |r| <= pi/4. Below |x| = 1e5 by Cody-Waite, pi/2 in three parts (the first
// two with 12 trailing zero bits; measured |error| < 1e-7 up to 1e5); beyond it, and where Cody-Waite leaves
// |r| < 2^-10 (x near a multiple of pi/2: cancellation), by Payne-Hanek.
float sin_poly(float r) { float z = r * r;
    return r + r * z * (-0.1666666716337204 + z * (0.008333329111337662 + z * (-0.00019839312881231308 + z * 2.7181220048078103e-06))); }
float cos_poly(float r) { float z = r * r;
    return 1.0 - 0.5 * z + z * z * (0.0416666679084301 + z * (-0.0013888883404433727 + z * (2.4799459424684756e-05 + z * -2.7205754804526805e-07))); }
float vsincos(float x, bool want_cos) {
    if (isnan(x) || isinf(x)) return F_NAN;
    float ax = abs(x);
    precise float r;                               // precise: no fusing or reordering of the reduction
    int q;
    float k = roundEven(ax * 0.6366197466850281);
    if (ax <= 1e5) {
        r = ((ax - k * 1.5703125) - k * 0.0004837512969970703) - k * 7.549790126404332e-08;
        q = int(k);
    }
    if (ax > 1e5 || (k != 0.0 && abs(r) < 0.0009765625)) r = reduce_pio2(ax, q);
    q = (q + (want_cos ? 1 : 0)) & 3;             // cos(x) = sin(x + pi/2)
    float v = ((q & 1) == 0) ? sin_poly(r) : cos_poly(r);
    v = (q & 2) == 0 ? v : -v;
    return (!want_cos && (floatBitsToUint(x) >> 31) != 0u) ? -v : v;   // sin is odd (-0 too), cos even
}

// tanh: odd polynomial near 0 (no cancellation), 1 - 2/(e^{2|x|} + 1) beyond.
float vtanh(float x) {
    if (x == 0.0) return x;                        // -0 stays -0
    float a = abs(x);
    if (a < 0.625) { float z = x * x;
        return x + x * z * (-0.3333333134651184 + z * (0.1333320587873459 + z * (-0.05394676327705383
               + z * (0.021700706332921982 + z * (-0.008177406154572964 + z * 0.002142968587577343))))); }
    if (isnan(x)) return x;
    float t = a > 9.1 ? 1.0 : 1.0 - 2.0 / (vexp(2.0 * a) + 1.0);
    return x < 0.0 ? -t : t;
}

float vsigmoid(float x) { return 1.0 / (1.0 + vexp(-x)); }

// erfc(x) for x >= 0 as exp(-x^2) (1 + p(q)) / (1 + 2x), q = (x - 4)/(x + 4) mapping [0, inf) onto [-1, 1), p a
// polynomial of degree 12 fitted to (1 + 2x) erfcx(x) - 1 (Chebyshev interpolation in float64, |error| 3e-9; the form is
// N. Juffa's). One exponential and no branch: GELU runs it for every element. On an H100 the GPT's float16 GELU kernel
// (12.6M elements; the memory's time about 17 us) took 58 us with the form before (a Chebyshev series in 2/(2+x), two
// exponentials, 1 - erf below 0.5) and 45 us with this one. -x^2 is split as -s - t, s = x*x rounded and t its rounding error
// from x's halves (12 bits each: their products are exact; Vulkan's fma may round twice, so it cannot give t).
// Simulated in float32 against float64 over [0, 10.05], with exp and division correctly rounded: 3.0e-7 relative.
float erfc_pos(float x) {
    float q = (x - 4.0) / (x + 4.0);
    float p = 0.0001142081746365875;
    p = fma(p, q, -0.00024843672872520983); p = fma(p, q, -0.000709132815245539); p = fma(p, q, 0.005082269664853811);
    p = fma(p, q, -0.016230391338467598);   p = fma(p, q, 0.037140458822250366); p = fma(p, q, -0.066319040954113);
    p = fma(p, q, 0.09374020248651505);     p = fma(p, q, -0.10104094445705414); p = fma(p, q, 0.06809617578983307);
    p = fma(p, q, 0.015379768796265125);    p = fma(p, q, -0.1396210938692093);  p = fma(p, q, 0.23299512267112732);
    float v = (1.0 + p) / (1.0 + 2.0 * x);
    precise float xh = uintBitsToFloat(floatBitsToUint(x) & 0xfffff000u), xl = x - xh;
    precise float s = x * x;
    precise float t = ((xh * xh - s) + 2.0 * xh * xl) + xl * xl;   // x^2 - s
    float ex = vexp(-s);
    return v * (ex - ex * t);                                      // exp(-x^2) = exp(-s) exp(-t), |t| <= ulp(s)/2
}
// erf(x) = x P(x^2) for |x| < 1 (8th degree in x^2), 1 - erfc(|x|) beyond.
float verf(float x) {
    float a = abs(x);
    if (a < 1.0) { float z = x * x;
        return x * (1.128379225730896 + z * (-0.37612637877464294 + z * (0.11283791065216064 + z * (-0.026866134256124496
               + z * (0.00522378645837307 + z * (-0.0008542705327272415 + z * (0.00011957354581682011
               + z * (-1.3914200280851219e-05 + z * 1.0601506801322103e-06)))))))); }
    if (isnan(x)) return x;
    float v = a > 10.0 ? 1.0 : 1.0 - erfc_pos(a);
    return x < 0.0 ? -v : v;
}
// erfc(x): erfc_pos is accurate relative to its result down to x = 0, so no branch on |x| (GELU's argument).
float verfc(float x) {
    if (isnan(x)) return x;
    float v = x > 10.5 || -x > 10.5 ? 0.0 : erfc_pos(abs(x));
    return x < 0.0 ? 2.0 - v : v;
}

// a / b, correctly scaled where 1/b is subnormal: a driver may divide as a * (1/b) with subnormals flushed (the
// NVIDIA driver did: max/max gave 0 and inf/(max/2) NaN). Both operands scaled by 1/4 is exact and keeps 1/b normal.
float vdiv(float a, float b) { return abs(b) > 8.5e37 ? (a * 0.25) / (b * 0.25) : a / b; }

// pow with C99/numpy special cases; the general case is e^(y log|x|) (rel. error ~|y log x| * 2^-24).
float vpow(float x, float y) {
    if (y == 0.0 || x == 1.0) return 1.0;
    if (isnan(x) || isnan(y)) return F_NAN;
    float ax = abs(x);
    bool yint = floor(y) == y;
    bool yodd = yint && abs(y) < 16777216.0 && (int(abs(y)) & 1) == 1;
    bool xneg = (floatBitsToUint(x) >> 31) != 0u;
    if (isinf(y)) return ax == 1.0 ? 1.0 : ((ax > 1.0) == (y > 0.0) ? F_INF : 0.0);
    float r;
    if (ax == 0.0) r = y > 0.0 ? 0.0 : F_INF;
    else if (isinf(ax)) r = y > 0.0 ? F_INF : 0.0;
    else if (x < 0.0 && !yint) return F_NAN;
    else r = vexp(y * vlog(ax));
    return (xneg && yodd) ? -r : r;
}
#endif
