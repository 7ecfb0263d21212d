float bad(float x) {
  return x + y;
}
