// The rope op against rotary embeddings written with sin, cos, pow and
// arange (LLaMA's rotate_half form), on a parameter: the loss is the mean
// absolute difference, forwards and, through the gradient, backwards.
const B = 2, H = 3, T = 16, Dh = 8, Half = 4

model c {
  param p: f32[B, H, T, Dh] = normal(0, 1)
  inv = pow(10000.0, arange(Half, dtype = f32) * (-2.0 / Dh))
  angle = reshape(arange(T, dtype = f32), [T, 1]) * reshape(inv, [1, Half])
  c = concat([cos(angle), cos(angle)], 1)
  s = concat([sin(angle), sin(angle)], 1)
  turned = concat([0.0 - slice(p, 3, Half, Dh), slice(p, 3, 0, Half)], 3)
  composed = p * c + turned * s
  output diff = rope(p, arange(T)) - composed
  loss = mean(abs(diff)) * 1000000.0
}
