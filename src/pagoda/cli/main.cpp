#include "pagoda/core/tensor.h"
int main(){}
