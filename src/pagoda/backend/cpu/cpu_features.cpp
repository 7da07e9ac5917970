// placeholder until the CPU ops land
namespace pagoda {}
