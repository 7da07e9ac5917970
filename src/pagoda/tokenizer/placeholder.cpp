namespace pagoda {}
