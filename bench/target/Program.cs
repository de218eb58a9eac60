// Benchmark target: a CoreCLR process holding millions of strings of mixed lengths (some non-ASCII, some
// duplicated, some on the large object heap), kept alive in arrays until it is dumped.
//   usage: bigstrings COUNT SEED [CONTENT]      prints "READY <pid> <count>" and waits on stdin
// CONTENT "plain" (the default): 1% of the values with a few non-ASCII characters.  "mixed": values like
// those of applications written in Korean, Chinese, Japanese or Russian and of heaps full of paths and JSON:
// about 1 in 6 non-ASCII (Hangul, CJK, Cyrillic, emoji as surrogate pairs, a few lone surrogates), Windows
// paths, JSON fragments with quotes and backslashes, control characters and U+2028.
using System;
using System.Diagnostics;
using System.Text;

static class Program
{
    static string[] Keep;

    static int Main(string[] args)
    {
        int count = args.Length > 0 ? int.Parse(args[0]) : 9000000;
        int seed = args.Length > 1 ? int.Parse(args[1]) : 12345;
        bool mixed = args.Length > 2 && args[2] == "mixed";
        var rnd = new Random(seed);
        var pool = new string[1000];
        for (int i = 0; i < pool.Length; i++) pool[i] = "pooled value #" + i + " " + new string('p', i % 40);
        Keep = new string[count];
        var sb = new StringBuilder();
        const string ascii = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-./:";
        const string wide = "äöüßéèñçøåŁżźćĄЖЗИЙКЛМНО日本語中文字한국어";
        for (int i = 0; i < count; i++)
        {
            int kind = rnd.Next(1000);
            if (kind < 100) { Keep[i] = new string(pool[rnd.Next(pool.Length)].ToCharArray()); continue; }  // duplicates
            if (i % 90000 == 0) { Keep[i] = new string((char)('A' + i % 26), 45000 + rnd.Next(20000)); continue; }  // LOH
            int len = rnd.Next(141);
            sb.Clear();
            if (mixed) { Keep[i] = Mixed(rnd, kind, len, sb, ascii); continue; }
            bool nonAscii = kind < 110;
            for (int k = 0; k < len; k++)
                sb.Append(nonAscii && k % 3 == 0 ? wide[rnd.Next(wide.Length)] : ascii[rnd.Next(ascii.Length)]);
            Keep[i] = sb.ToString();
        }
        Console.WriteLine("READY " + Process.GetCurrentProcess().Id + " " + count);
        Console.Out.Flush();
        Console.ReadLine();
        GC.KeepAlive(Keep);
        return 0;
    }

    static readonly string[] Words = { "Users", "AppData", "Local", "Temp", "Program Files", "logs", "cache", "bin",
                                       "Release", "net8.0", "data", "config" };

    // kind: 100..999 (below 100 are the pooled copies)
    static string Mixed(Random rnd, int kind, int len, StringBuilder sb, string ascii)
    {
        if (kind < 267)  // about 1 in 6: another script, with ASCII spaces and digits between
        {
            int script = kind % 4;
            for (int k = 0; k < len; k++)
            {
                if (rnd.Next(6) == 0) { sb.Append(rnd.Next(3) == 0 ? (char)('0' + rnd.Next(10)) : ' '); continue; }
                switch (script)
                {
                    case 0: sb.Append((char)(0xAC00 + rnd.Next(11172))); break;  // Hangul syllables
                    case 1: sb.Append((char)(0x4E00 + rnd.Next(0x5000))); break;  // CJK ideographs
                    case 2: sb.Append((char)(0x0410 + rnd.Next(64))); break;  // Cyrillic
                    default: sb.Append(char.ConvertFromUtf32(0x1F600 + rnd.Next(80))); break;  // emoji: pairs
                }
            }
            if (kind == 100 && rnd.Next(100) == 0) sb.Append((char)(0xD800 + rnd.Next(0x800)));  // a lone surrogate
            return sb.ToString();
        }
        if (kind < 400)  // a Windows path
        {
            sb.Append("C:\\");
            while (sb.Length < len) sb.Append(Words[rnd.Next(Words.Length)]).Append('\\');
            return sb.Append("file").Append(rnd.Next(1000)).Append(".txt").ToString();
        }
        if (kind < 500)  // a JSON fragment, with an escaped path in it
        {
            sb.Append("{\"id\": ").Append(rnd.Next()).Append(", \"name\": \"");
            while (sb.Length < len) sb.Append(ascii[rnd.Next(ascii.Length)]);
            return sb.Append("\", \"path\": \"C:\\\\temp\\\\x\"}").ToString();
        }
        if (kind < 530)  // control characters, line and paragraph separators
        {
            const string odd = "\t\n\r\0\u0001\u001b\u007f\u0085\u2028\u2029";
            for (int k = 0; k < len; k++)
                sb.Append(k % 7 == 0 ? odd[rnd.Next(odd.Length)] : ascii[rnd.Next(ascii.Length)]);
            return sb.ToString();
        }
        for (int k = 0; k < len; k++) sb.Append(ascii[rnd.Next(ascii.Length)]);
        return sb.ToString();
    }
}
